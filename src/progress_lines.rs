//! Progress of long work as lines on stderr (`progress := true`).
//!
//! DuckDB's progress bar cannot move for us: its C API, the only one a loadable extension on the
//! stable ABI has, gives a table function no progress callback (a C++ table function's
//! `table_scan_progress`; `duckdb_query_progress` only reads a connection's), and our work
//! happens before the first row is returned, so the bar shows 0% until the end. With
//! `progress := true` a function instead prints what it finished, as it finishes it —
//! `lakehouse_compact [12.4s] p=3: group 4/12 rewritten (96.0 MiB in)` — to stderr, which the
//! DuckDB CLI shows as it runs and a cron job logs. The lines go to the thread running the call
//! ([`enable`]), so concurrent calls of other connections do not mix their lines in.

use std::cell::RefCell;
use std::io::Write;
use std::time::Instant;

thread_local! {
    static CURRENT: RefCell<Option<(&'static str, Instant)>> = const { RefCell::new(None) };
}

/// Progress lines of `function` for as long as the guard lives (when `on`).
pub struct Guard {
    previous: Option<(&'static str, Instant)>,
    on: bool,
}

/// Turns progress lines on for the calling thread while the guard lives (`on`), each headed
/// `function` and the time since this call.
pub fn enable(function: &'static str, on: bool) -> Guard {
    let previous = if on { CURRENT.with(|c| c.borrow_mut().replace((function, Instant::now()))) } else { None };
    Guard { previous, on }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if self.on {
            CURRENT.with(|c| *c.borrow_mut() = self.previous.take());
        }
    }
}

/// Prints one progress line (`what`, evaluated only when lines are on).
pub fn line(what: impl FnOnce() -> String) {
    let Some((function, started)) = CURRENT.with(|c| *c.borrow()) else { return };
    let text = format!("{function} [{:.1}s] {}\n", started.elapsed().as_secs_f64(), what());
    // A closed stderr must not fail the work.
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

/// Whether progress lines are on for this thread.
pub fn on() -> bool {
    CURRENT.with(|c| c.borrow().is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_on_only_while_the_guard_lives_and_nest() {
        assert!(!on());
        let mut asked = false;
        line(|| {
            asked = true;
            String::new()
        });
        assert!(!asked, "the text is not made when lines are off");
        {
            let _outer = enable("lakehouse_gate", true);
            assert!(on());
            {
                let _off = enable("lakehouse_compact", false);
                assert!(on(), "an inner call without progress leaves the outer one's on");
            }
            {
                let _inner = enable("lakehouse_compact", true);
                assert_eq!(CURRENT.with(|c| c.borrow().map(|(f, _)| f)), Some("lakehouse_compact"));
            }
            assert_eq!(CURRENT.with(|c| c.borrow().map(|(f, _)| f)), Some("lakehouse_gate"));
        }
        assert!(!on());
    }
}
