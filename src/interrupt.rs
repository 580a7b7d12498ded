//! Answering Ctrl-C between the steps of long work.
//!
//! DuckDB interrupts a query by flagging its client context, which it checks between chunks of
//! execution; a table function that does its work in one call (ours: rewrite, commit, delete,
//! post) is never asked, and the C API has no way to ask whether the calling query was
//! interrupted. So while long work runs, a [`Guard`] puts a `SIGINT` handler in front of the
//! host's (the DuckDB CLI's, Python's). The first Ctrl-C is recorded, and the work stops at its
//! next step — between compaction groups, before a commit, between delete batches and webhook
//! attempts — with [`ErrorKind::Interrupted`]: every step either finished or was abandoned before
//! its commit, and what an abandoned step wrote is removed. The host then reports the error as
//! for any failed query (the CLI running `-c` would otherwise exit on the spot, leaving the files
//! a rewrite had written). A second Ctrl-C goes to the host's handler, as if we were not there.
//!
//! Where the process has no `SIGINT` handler of its own (default action: terminate), none is
//! installed: Ctrl-C ends the process as it always did, and atomic commits keep the table whole.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::error::{Error, ErrorKind, Result};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);
/// `SIGINT`s received while a guard is alive.
static RECEIVED: AtomicUsize = AtomicUsize::new(0);
/// The host's handler while ours is installed (a `sighandler_t`, or 0).
static PREVIOUS_HANDLER: AtomicUsize = AtomicUsize::new(0);
/// Whether the host's handler takes `(sig, info, context)` (`SA_SIGINFO`).
static PREVIOUS_SIGINFO: AtomicBool = AtomicBool::new(false);
/// Guards alive, and the host's full `sigaction` to restore when the last one drops.
static INSTALLED: Mutex<(usize, Option<libc::sigaction>)> = Mutex::new((0, None));

extern "C" fn on_sigint(sig: libc::c_int, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
    INTERRUPTED.store(true, Ordering::SeqCst);
    if RECEIVED.fetch_add(1, Ordering::SeqCst) == 0 {
        return; // the first: the work stops at its next step
    }
    let previous = PREVIOUS_HANDLER.load(Ordering::SeqCst);
    if previous == 0 || previous == libc::SIG_DFL || previous == libc::SIG_IGN {
        return;
    }
    // SAFETY: `previous` is the handler the host installed for SIGINT, called as it expects.
    unsafe {
        if PREVIOUS_SIGINFO.load(Ordering::SeqCst) {
            let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) = std::mem::transmute(previous);
            f(sig, info, context);
        } else {
            let f: extern "C" fn(libc::c_int) = std::mem::transmute(previous);
            f(sig);
        }
    }
}

/// While alive, the first Ctrl-C is recorded for [`check`]; a second reaches the host's handler.
pub struct Guard {
    installed: bool,
}

impl Guard {
    /// Starts listening; clears an interrupt recorded before.
    pub fn new() -> Self {
        INTERRUPTED.store(false, Ordering::SeqCst);
        RECEIVED.store(0, Ordering::SeqCst);
        let Ok(mut state) = INSTALLED.lock() else { return Guard { installed: false } };
        if state.0 > 0 {
            state.0 += 1;
            return Guard { installed: true };
        }
        // SAFETY: plain sigaction calls on SIGINT with zero-initialised structs.
        unsafe {
            let mut current: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(libc::SIGINT, std::ptr::null(), &mut current) != 0 {
                return Guard { installed: false };
            }
            if current.sa_sigaction == libc::SIG_DFL || current.sa_sigaction == libc::SIG_IGN {
                return Guard { installed: false };
            }
            PREVIOUS_HANDLER.store(current.sa_sigaction, Ordering::SeqCst);
            PREVIOUS_SIGINFO.store(current.sa_flags & libc::SA_SIGINFO != 0, Ordering::SeqCst);
            let mut ours: libc::sigaction = std::mem::zeroed();
            ours.sa_sigaction = on_sigint as *const () as usize;
            ours.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
            libc::sigemptyset(&mut ours.sa_mask);
            if libc::sigaction(libc::SIGINT, &ours, std::ptr::null_mut()) != 0 {
                return Guard { installed: false };
            }
            *state = (1, Some(current));
        }
        Guard { installed: true }
    }
}

impl Default for Guard {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if !self.installed {
            return;
        }
        let Ok(mut state) = INSTALLED.lock() else { return };
        state.0 = state.0.saturating_sub(1);
        if state.0 == 0
            && let Some(previous) = state.1.take()
        {
            // SAFETY: restores the host's own sigaction, as read when the first guard started.
            unsafe {
                let mut current: libc::sigaction = std::mem::zeroed();
                libc::sigaction(libc::SIGINT, std::ptr::null(), &mut current);
                // Only if ours is still the one installed (the host may have replaced it).
                if current.sa_sigaction == on_sigint as *const () as usize {
                    libc::sigaction(libc::SIGINT, &previous, std::ptr::null_mut());
                }
            }
        }
    }
}

/// Records an interrupt as Ctrl-C would (a server stopping on SIGTERM asks its run in progress
/// to stop at its next step).
pub fn raise() {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Whether Ctrl-C arrived since the current guard started.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// An [`ErrorKind::Interrupted`] error when Ctrl-C arrived; `state` says what stands
/// ("nothing was committed").
pub fn check(state: &str) -> Result<()> {
    if interrupted() {
        return Err(Error::new(ErrorKind::Interrupted, format!("interrupted: {state}")));
    }
    Ok(())
}

/// Test hook (compiled only with the `test-hooks` feature, which the test build enables):
/// `LAKEHOUSE_TEST_PAUSE_BEFORE_COMMIT_MS` holds the commit back so an integration test can
/// commit a concurrent change, or interrupt, in between (compaction of either format, manifest
/// rewrites and expiry call it once, before their first commit attempt). An interrupt ends the pause.
#[cfg(feature = "test-hooks")]
pub fn pause_for_tests() {
    let Some(ms) = std::env::var("LAKEHOUSE_TEST_PAUSE_BEFORE_COMMIT_MS").ok().and_then(|v| v.parse::<u64>().ok())
    else {
        return;
    };
    let until = std::time::Instant::now() + std::time::Duration::from_millis(ms.min(60_000));
    while std::time::Instant::now() < until && !interrupted() {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Without the `test-hooks` feature (every release build) there is no pause.
#[cfg(not(feature = "test-hooks"))]
#[inline(always)]
pub fn pause_for_tests() {}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without the feature (every release build) the hook does nothing, whatever the variable
    /// says: were it compiled in, this test would hang for ten minutes.
    #[cfg(not(feature = "test-hooks"))]
    #[test]
    fn the_test_pause_is_not_in_builds_without_the_test_hooks() {
        // SAFETY: the variable is read only by pause_for_tests, which no other unit test calls.
        unsafe { std::env::set_var("LAKEHOUSE_TEST_PAUSE_BEFORE_COMMIT_MS", "600000") };
        pause_for_tests();
        unsafe { std::env::remove_var("LAKEHOUSE_TEST_PAUSE_BEFORE_COMMIT_MS") };
    }

    extern "C" fn host_handler(_sig: libc::c_int) {
        HOST_CALLED.store(true, Ordering::SeqCst);
    }
    static HOST_CALLED: AtomicBool = AtomicBool::new(false);

    #[test]
    fn sigint_is_recorded_chained_and_the_host_handler_restored() {
        unsafe {
            libc::signal(libc::SIGINT, host_handler as *const () as libc::sighandler_t);
        }
        {
            let _guard = Guard::new();
            assert!(check("x").is_ok());
            unsafe { libc::raise(libc::SIGINT) };
            let err = check("nothing was committed").unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Interrupted);
            assert_eq!(err.to_string(), "interrupted: nothing was committed");
            assert!(!HOST_CALLED.load(Ordering::SeqCst), "the first Ctrl-C is ours");
            unsafe { libc::raise(libc::SIGINT) };
            assert!(HOST_CALLED.load(Ordering::SeqCst), "a second reaches the host's handler");
        }
        let restored = unsafe { libc::signal(libc::SIGINT, libc::SIG_DFL) };
        assert_eq!(restored, host_handler as *const () as libc::sighandler_t);
        assert!(!Guard::new().installed, "no handler of the host's: none of ours either");
    }
}
