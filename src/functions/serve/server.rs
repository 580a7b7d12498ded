//! The event-driven gate: an authenticated webhook (`lakehouse_serve`) that runs the gate on a
//! table when a CDC pipeline has landed a batch — the reference flow's second trigger.
//!
//! - `POST /v1/tables/{table}/gate` → `202 {"execution_id": …, "coalesced": …}`; the body is
//!   empty or a JSON object of threshold overrides (`small_file_threshold_mb`,
//!   `fragmentation_ratio_threshold`, `target_file_size_mb`, `snapshot_retention_days`), checked
//!   as the SQL parameters are; `{table}` must be in the `tables` allow-list (404 otherwise: a
//!   caller never names a path).
//! - `GET /v1/runs/{execution_id}` → the run's status and scorecard rows (authenticated).
//! - `GET /healthz` → `ok`, unauthenticated, nothing else.
//!
//! Authentication: `Authorization: Bearer <key>`, or `X-Lakehouse-Signature: sha256=<hex
//! HMAC-SHA256(key, string_to_sign)>` with `X-Lakehouse-Timestamp` (Unix seconds), where the
//! string to sign is the timestamp, the method, the request target (path and query as sent) and
//! the body, the first three each ended by a newline (`string_to_sign`): a signature is good
//! for one request to one URL only. The timestamp must be at most five minutes old and at most
//! `SIGNATURE_FUTURE_S` ahead, a signature is accepted once (replay protection, as Slack and
//! Stripe sign requests), and a restarted server, whose memory of seen signatures is empty,
//! accepts only timestamps after its start (`not_before_s`): none its predecessor can have seen.
//! Comparisons are constant-time; a 401 never says which part failed. The key comes from
//! `LAKEHOUSE_WEBHOOK_KEY` only (SQL text lands in logs).
//!
//! Abuse: bodies over 64 KiB → 413 (before reading, from `Content-Length`, and while reading);
//! `HEADER_TIMEOUT` to send the headers, `BODY_TIMEOUT` to send the body (408), one request
//! per connection and 30 s per connection; at most `max_connections` connections, at most
//! `max_connections_per_peer` of them from one address (as many more from it wait, holding no
//! slot, up to `HEADER_TIMEOUT`; beyond that they are closed at once; further ones wait in
//! the kernel's backlog). A wrong bearer key is refused before the body is read.
//!
//! Runs: one worker runs the gates, one at a time. Per table at most one run is queued: triggers
//! that arrive while it waits join it (the latest overrides win), so a burst of CDC batches
//! while a gate runs schedules exactly one follow-up. Each run goes through the same gate as SQL
//! (Slack scorecard, run history); every failed run posts the failure alert carrying the
//! execution id and is recorded, and the server goes on. A trigger's overrides are checked with
//! the server's other options before its 202; a served table that does not exist stops the
//! start; the start prints where it listens. Ctrl-C, SIGTERM or the end of the process that
//! started the server stops accepting, lets the run in progress stop at its next step (every
//! action commits atomically or not at all), cancels queued runs and returns one row per run.
//!
//! The parts, one concern each: `super::state` (what they share), `super::auth` (keys and
//! signatures), `super::http` (connections, limits, routes), `super::runs` (the queue, the
//! worker, overrides) and `super::signals` (SIGTERM, the parent process).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use super::auth::not_before_s;
use super::http::accept_loop;
use super::runs::{row, work};
use super::signals::{ParentWatch, TermGuard};
use super::state::{Key, RunState, ServeConfig, Shared, State, now_ms};
use crate::duck::HostDb;
use crate::error::{Error, ErrorKind, Result};
use crate::functions::Cell;
use crate::table::Table;

pub use super::runs::parse_overrides;

/// Serves until Ctrl-C or SIGTERM; returns one row per run ([`COLUMNS`]).
pub fn serve(config: &ServeConfig, host: &HostDb) -> Result<Vec<Vec<Cell>>> {
    let secret = std::env::var("LAKEHOUSE_WEBHOOK_KEY").unwrap_or_default();
    if secret.trim().len() < 16 {
        return Err(Error::invalid(
            "set LAKEHOUSE_WEBHOOK_KEY to a secret of at least 16 characters before starting the server (the key is \
             never a SQL parameter: SQL text lands in logs and history)",
        ));
    }
    check_tables(config)?;
    let shared = Arc::new(Shared {
        key: Key::new(secret.trim().as_bytes()),
        tables: config.tables.iter().cloned().collect(),
        template: config.template.clone(),
        state: Mutex::new(State::default()),
        wake: Condvar::new(),
        seen: Mutex::new(HashMap::new()),
        not_before_s: not_before_s(now_ms() / 1000),
    });
    let listener = crate::runtime::block_on(tokio::net::TcpListener::bind(config.listen))?
        .map_err(|e| Error::new(ErrorKind::Io, format!("cannot listen on {}: {e}", config.listen)))?;
    let address = listener.local_addr().unwrap_or(config.listen);
    eprintln!("{}", started_line(address, config));
    let terminate = TermGuard::new();
    let parent = ParentWatch::new(config.stop_with_parent);
    let stop = Arc::new(tokio::sync::Notify::new());
    let server = {
        let (shared, stop) = (shared.clone(), stop.clone());
        let limits = (config.max_connections, config.max_connections_per_peer);
        crate::runtime::spawn(async move { accept_loop(listener, shared, stop, limits).await })?
    };
    let worker = {
        let (shared, config, host) = (shared.clone(), config.clone(), host.clone());
        std::thread::Builder::new()
            .name("lakehouse-serve-worker".into())
            .spawn(move || work(&shared, &config, &host))
            .map_err(|e| Error::new(ErrorKind::Io, format!("cannot start the gate worker: {e}")))?
    };
    while !crate::interrupt::interrupted() && !terminate.received() {
        if let Some(gone) = parent.gone() {
            eprintln!("lakehouse_serve: the process that started this one (pid {gone}) is gone; stopping");
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    eprintln!("lakehouse_serve: stopping (the run in progress stops at its next step, queued runs are cancelled)");
    // Stop: no new connections; the run in progress stops at its next step; queued runs cancel.
    crate::interrupt::raise();
    stop.notify_one();
    let _ = crate::runtime::block_on(server);
    {
        let mut state = shared.state.lock().map_err(|_| poisoned())?;
        state.stopping = true;
        let queued: Vec<String> = state.queue.drain(..).collect();
        for id in queued {
            if let Some(run) = state.runs.get_mut(&id) {
                run.state = RunState::Cancelled;
            }
        }
        state.queued.clear();
    }
    shared.wake.notify_all();
    let _ = worker.join();
    let state = shared.state.lock().map_err(|_| poisoned())?;
    Ok(state.order.iter().filter_map(|id| state.runs.get(id).map(|run| row(id, run))).collect())
}

/// Refuses to start when a served table does not exist (a misspelt path or name would otherwise
/// serve 202s for runs that all fail). A table that exists but cannot be opened now (corrupt
/// metadata, a catalog that does not answer) is served — each run then fails and alerts — and
/// named on stderr.
pub(super) fn check_tables(config: &ServeConfig) -> Result<()> {
    for table in &config.tables {
        match Table::open(table, &config.template.locate) {
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::NotFound => {
                return Err(Error::invalid(format!("tables: '{table}' cannot be served: {e}")));
            }
            Err(e) => eprintln!(
                "lakehouse_serve: warning: '{table}' cannot be opened now (its runs will fail until it can): {e}"
            ),
        }
    }
    Ok(())
}

/// The line printed at start: where it listens, what it serves, where runs are recorded.
pub(super) fn started_line(address: SocketAddr, config: &ServeConfig) -> String {
    let mut recorded = Vec::new();
    if let Some(path) = &config.history.path {
        recorded.push(format!("{}/*.parquet", path.display()));
    }
    if let Some(table) = &config.history.table {
        recorded.push(format!("table {table}"));
    }
    format!(
        "lakehouse_serve: listening on http://{address} (POST /v1/tables/{{table}}/gate) for {} table{}: {}; runs recorded in {}{}",
        config.tables.len(),
        if config.tables.len() == 1 { "" } else { "s" },
        config.tables.join(", "),
        if recorded.is_empty() {
            "no history (history_path or history_table)".to_string()
        } else {
            recorded.join(" and ")
        },
        if config.template.dry_run { "; dry run" } else { "" },
    )
}

pub(super) fn poisoned() -> Error {
    Error::new(ErrorKind::Io, "the server's state was poisoned by a panic")
}

/// The result columns of `lakehouse_serve`: one row per run.
pub const COLUMNS: [(&str, duckdb::core::LogicalTypeId); 9] = {
    use duckdb::core::LogicalTypeId::*;
    [
        ("execution_id", Varchar),
        ("table_name", Varchar),
        ("status", Varchar),
        ("triggers", Bigint),
        ("received_at", Timestamp),
        ("started_at", Timestamp),
        ("duration_ms", Bigint),
        ("gate_status", Varchar),
        ("message", Varchar),
    ]
};
