//! The one Tokio runtime the extension drives iceberg-rust's async I/O with.
//!
//! DuckDB calls us on its own threads, outside any runtime; [`block_on`] runs a future to
//! completion on a lazily built multi-threaded runtime sized to the machine, so manifest
//! decoding spawned with [`spawn`] spreads over the cores.

use std::future::Future;
use std::sync::OnceLock;

use tokio::runtime::{Builder, Runtime};

use crate::error::{Error, ErrorKind, Result};

fn runtime() -> Result<&'static Runtime> {
    static RUNTIME: OnceLock<std::result::Result<Runtime, String>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2).max(2);
            Builder::new_multi_thread()
                .worker_threads(threads)
                .thread_name("lakehouse-io")
                .enable_all()
                .build()
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| Error::new(ErrorKind::Io, format!("cannot start the I/O runtime: {e}")))
}

/// The shared runtime as iceberg-rust's handle, for the `Table`s we build ourselves.
pub fn iceberg_runtime() -> Result<iceberg::Runtime> {
    Ok(iceberg::Runtime::new(runtime()?))
}

/// Runs `future` to completion on the shared runtime.
pub fn block_on<F: Future>(future: F) -> Result<F::Output> {
    Ok(runtime()?.block_on(future))
}

/// Spawns `future` on the shared runtime's worker threads.
pub fn spawn<F>(future: F) -> Result<tokio::task::JoinHandle<F::Output>>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    Ok(runtime()?.spawn(future))
}
