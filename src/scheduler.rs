//! Keeping every DuckDB thread busy while a table function's work runs.
//!
//! A table function's work runs in its init, which DuckDB runs as a pipeline task on whichever
//! thread takes it. When a DuckDB worker takes it, the work's nested statements (the rewrite's
//! `COPY`) run on that worker, and the query's client thread only waits for the outer query's own
//! tasks — it never helps with the nested ones: half of all runs went at half speed on two cores.
//!
//! So the work runs on a thread of ours ([`TaskHelper::run`]), as the nested statements' client,
//! and the thread DuckDB gave the init executes DuckDB's queued tasks meanwhile (the C API's
//! `duckdb_execute_n_tasks_state`, one task at a time) — the nested statements' among them —
//! until the work is done. Whichever thread took the init, every thread DuckDB has works on the
//! statement.

use std::time::Duration;

use duckdb::ffi;

use crate::error::{Error, ErrorKind, Result};

/// A handle on one database's task scheduler (created at `LOAD`, destroyed with the database's
/// registered functions).
pub struct TaskHelper {
    state: ffi::duckdb_task_state,
}

// SAFETY: a task state is DuckDB's `CAPITaskState` (a database reference and an atomic marker);
// DuckDB's scheduler is built to be driven from any thread, concurrently.
unsafe impl Send for TaskHelper {}
unsafe impl Sync for TaskHelper {}

impl TaskHelper {
    /// A helper for the database `db`; `None` if DuckDB gives no task state.
    ///
    /// # Safety
    /// `db` must be a live database handle (the one DuckDB passes to the entrypoint).
    pub unsafe fn new(db: ffi::duckdb_database) -> Option<Self> {
        // SAFETY: per the caller.
        let state = unsafe { ffi::duckdb_create_task_state(db) };
        (!state.is_null()).then_some(TaskHelper { state })
    }

    /// Runs `work` on a thread of ours while this thread executes DuckDB's queued tasks, and
    /// returns what `work` returned. A panic in `work` is an error, never unwinding into DuckDB.
    pub fn run<T: Send>(&self, work: impl FnOnce() -> T + Send) -> Result<T> {
        std::thread::scope(|scope| {
            let waiter = std::thread::current();
            let worker = std::thread::Builder::new()
                .name("lakehouse-work".into())
                .spawn_scoped(scope, move || {
                    let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work));
                    waiter.unpark();
                    out
                })
                .map_err(|e| Error::new(ErrorKind::Io, format!("cannot start a worker thread: {e}")))?;
            while !worker.is_finished() {
                // SAFETY: the state lives as long as `self`.
                let ran = unsafe { ffi::duckdb_execute_n_tasks_state(self.state, 1) };
                if ran == 0 {
                    // Nothing queued (the work is in Rust, or between statements): wait for it
                    // to finish or for a millisecond, then look again.
                    std::thread::park_timeout(Duration::from_millis(1));
                }
            }
            match worker.join() {
                Ok(Ok(out)) => Ok(out),
                Ok(Err(_)) | Err(_) => {
                    Err(Error::new(ErrorKind::Io, "the work stopped on an internal error (a panic)"))
                }
            }
        })
    }
}

impl Drop for TaskHelper {
    fn drop(&mut self) {
        // SAFETY: created by `duckdb_create_task_state`, destroyed once.
        unsafe { ffi::duckdb_destroy_task_state(self.state) };
    }
}
