//! How the server learns it should stop: SIGTERM (systemd's stop), recorded instead of ending
//! the process ([`TermGuard`]), and the process that started it going away ([`ParentWatch`]).

use std::sync::atomic::{AtomicBool, Ordering};

static TERMINATED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigterm(_sig: libc::c_int) {
    TERMINATED.store(true, Ordering::SeqCst);
}

/// While alive, SIGTERM is recorded (the server stops) instead of ending the process; the
/// host's disposition comes back when it drops.
pub(super) struct TermGuard {
    previous: Option<libc::sigaction>,
}

impl TermGuard {
    pub(super) fn new() -> Self {
        TERMINATED.store(false, Ordering::SeqCst);
        // SAFETY: installing a handler that only stores to an atomic; the old action is kept.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_sigterm as *const () as libc::sighandler_t;
            // Interrupted system calls resume (DuckDB's file I/O in a run must not fail on EINTR).
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            let mut previous: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(libc::SIGTERM, &action, &mut previous) == 0 {
                return TermGuard { previous: Some(previous) };
            }
        }
        TermGuard { previous: None }
    }

    pub(super) fn received(&self) -> bool {
        TERMINATED.load(Ordering::SeqCst)
    }
}

impl Drop for TermGuard {
    fn drop(&mut self) {
        if let Some(previous) = self.previous.take() {
            // SAFETY: restores the action saved in `new`.
            unsafe { libc::sigaction(libc::SIGTERM, &previous, std::ptr::null_mut()) };
        }
    }
}

/// The process that started this one, watched so that the server stops when it goes away.
///
/// The pip `duckdb` command is a Python wrapper that runs the real binary as its child and
/// passes no signal on: `kill -TERM` on it ends the wrapper only, and the server went on serving
/// (holding its port). When the parent is gone this process is re-parented (to init or a
/// subreaper), so `getppid()` changes: the server then stops as on SIGTERM. A process started by
/// init itself (systemd's services: parent pid 1) is not watched — it never changes parent. On
/// Linux, `PR_SET_PDEATHSIG` would have to be set by the child before it `exec`s; an extension
/// loaded later cannot set it for a parent that is already there, hence the watch.
pub(super) struct ParentWatch {
    parent: Option<libc::pid_t>,
}

impl ParentWatch {
    /// Watches the current parent when `enabled` (`stop_with_parent`) and it is not init.
    pub(super) fn new(enabled: bool) -> Self {
        // SAFETY: getppid has no preconditions and cannot fail.
        let parent = unsafe { libc::getppid() };
        ParentWatch { parent: (enabled && parent > 1).then_some(parent) }
    }

    /// The pid of the parent when it has gone away since [`ParentWatch::new`].
    pub(super) fn gone(&self) -> Option<libc::pid_t> {
        let parent = self.parent?;
        // SAFETY: as above.
        (unsafe { libc::getppid() } != parent).then_some(parent)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_parent_that_is_still_there_is_not_gone() {
        assert_eq!(ParentWatch::new(true).gone(), None);
        assert_eq!(ParentWatch::new(false).parent, None);
        let watch = ParentWatch { parent: Some(1) };
        // SAFETY: as above.
        let ours = unsafe { libc::getppid() };
        assert_eq!(watch.gone(), (ours != 1).then_some(1));
    }
}
