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
//! the body, the first three each ended by a newline ([`string_to_sign`]): a signature is good
//! for one request to one URL only. The timestamp must be at most five minutes old and at most
//! [`SIGNATURE_FUTURE_S`] ahead, a signature is accepted once (replay protection, as Slack and
//! Stripe sign requests), and a restarted server, whose memory of seen signatures is empty,
//! accepts only timestamps after its start ([`not_before_s`]): none its predecessor can have seen.
//! Comparisons are constant-time; a 401 never says which part failed. The key comes from
//! `LAKEHOUSE_WEBHOOK_KEY` only (SQL text lands in logs).
//!
//! Abuse: bodies over 64 KiB → 413 (before reading, from `Content-Length`, and while reading);
//! [`HEADER_TIMEOUT`] to send the headers, [`BODY_TIMEOUT`] to send the body (408), one request
//! per connection and 30 s per connection; at most `max_connections` connections, at most
//! `max_connections_per_peer` of them from one address (as many more from it wait, holding no
//! slot, up to [`HEADER_TIMEOUT`]; beyond that they are closed at once; further ones wait in
//! the kernel's backlog). A wrong bearer key is refused before the body is read.
//!
//! Runs: one worker runs the gates, one at a time. Per table at most one run is queued: triggers
//! that arrive while it waits join it (the latest overrides win), so a burst of CDC batches
//! while a gate runs schedules exactly one follow-up. Each run goes through the same gate as SQL
//! (Slack scorecard, failure alert carrying the execution id, history table); a failing run is
//! recorded and the server goes on. Ctrl-C or SIGTERM stops accepting, lets the run in
//! progress stop at its next step (every action commits atomically or not at all), cancels
//! queued runs and returns one row per run.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use ring::hmac;
use serde_json::{Value, json};

use crate::action::gate::{GateOptions, run_gate_as};
use crate::duck::HostDb;
use crate::error::{Error, ErrorKind, Result};
use crate::functions::Cell;

/// Largest request body accepted.
pub const MAX_BODY_BYTES: usize = 64 * 1024;
/// How old a signed request's timestamp may be.
pub const SIGNATURE_WINDOW_S: i64 = 300;
/// How far ahead of the server's clock a signed request's timestamp may be (clock skew).
pub const SIGNATURE_FUTURE_S: i64 = 5;
/// Time allowed to send the request headers.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(5);
/// Time allowed to send the request body (after the headers).
pub const BODY_TIMEOUT: Duration = Duration::from_secs(5);
/// Time allowed for a whole connection.
const CONNECTION_TIMEOUT: Duration = Duration::from_secs(30);
/// Runs remembered for `GET /v1/runs/{id}` (older ones are forgotten first).
const RUNS_KEPT: usize = 1000;
/// Threshold overrides a trigger may send.
pub const OVERRIDES: [&str; 4] =
    ["small_file_threshold_mb", "fragmentation_ratio_threshold", "target_file_size_mb", "snapshot_retention_days"];

/// What `lakehouse_serve` was asked to do.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Where to listen.
    pub listen: SocketAddr,
    /// Tables a trigger may name.
    pub tables: Vec<String>,
    /// The gate's options (its `table` is replaced per run).
    pub template: GateOptions,
    /// Where each run's scorecard rows go, quoted.
    pub history_table: Option<String>,
    /// Connections served at once.
    pub max_connections: usize,
    /// Connections served at once from one peer address.
    pub max_connections_per_peer: usize,
}

/// The shared key, as given and as HMAC keys.
struct Key {
    signing: hmac::Key,
    /// A per-process key under which presented bearer tokens are compared with the real one.
    bearer: hmac::Key,
    bearer_tag: hmac::Tag,
}

impl Key {
    fn new(secret: &[u8]) -> Self {
        let random = uuid::Uuid::new_v4();
        let bearer = hmac::Key::new(hmac::HMAC_SHA256, random.as_bytes());
        let bearer_tag = hmac::sign(&bearer, secret);
        Key { signing: hmac::Key::new(hmac::HMAC_SHA256, secret), bearer, bearer_tag }
    }
}

/// The status of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunState {
    /// Waiting for the worker.
    Queued,
    /// The gate is running.
    Running,
    /// The gate finished (its scorecard says what it did).
    Succeeded,
    /// The gate failed (the alert was posted when a webhook is set).
    Failed,
    /// Never started: the server stopped first.
    Cancelled,
}

impl RunState {
    fn as_str(self) -> &'static str {
        match self {
            RunState::Queued => "queued",
            RunState::Running => "running",
            RunState::Succeeded => "succeeded",
            RunState::Failed => "failed",
            RunState::Cancelled => "cancelled",
        }
    }
}

/// One run.
#[derive(Debug, Clone)]
struct Run {
    table: String,
    state: RunState,
    triggers: u32,
    overrides: serde_json::Map<String, Value>,
    received_ms: i64,
    started_ms: Option<i64>,
    duration_ms: Option<i64>,
    scorecard: Option<Value>,
    error: Option<String>,
}

#[derive(Default)]
struct State {
    runs: HashMap<String, Run>,
    /// Every run, in the order it was first triggered.
    order: Vec<String>,
    /// Runs waiting for the worker.
    queue: VecDeque<String>,
    /// Per table: the run waiting to start, if any.
    queued: HashMap<String, String>,
    stopping: bool,
}

struct Shared {
    key: Key,
    tables: BTreeSet<String>,
    state: Mutex<State>,
    wake: Condvar,
    /// Signatures seen within the window (replay protection), with their timestamps.
    seen: Mutex<HashMap<String, i64>>,
    /// Signed requests must be timestamped after this ([`not_before_s`]).
    not_before_s: i64,
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// Serves until Ctrl-C or SIGTERM; returns one row per run ([`COLUMNS`]).
pub fn serve(config: &ServeConfig, host: &HostDb) -> Result<Vec<Vec<Cell>>> {
    let secret = std::env::var("LAKEHOUSE_WEBHOOK_KEY").unwrap_or_default();
    if secret.trim().len() < 16 {
        return Err(Error::invalid(
            "set LAKEHOUSE_WEBHOOK_KEY to a secret of at least 16 characters before starting the server (the key is \
             never a SQL parameter: SQL text lands in logs and history)",
        ));
    }
    let shared = Arc::new(Shared {
        key: Key::new(secret.trim().as_bytes()),
        tables: config.tables.iter().cloned().collect(),
        state: Mutex::new(State::default()),
        wake: Condvar::new(),
        seen: Mutex::new(HashMap::new()),
        not_before_s: not_before_s(now_ms() / 1000),
    });
    let listener = crate::runtime::block_on(tokio::net::TcpListener::bind(config.listen))?
        .map_err(|e| Error::new(ErrorKind::Io, format!("cannot listen on {}: {e}", config.listen)))?;
    let terminate = TermGuard::new();
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
        std::thread::sleep(Duration::from_millis(50));
    }
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

fn poisoned() -> Error {
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

fn row(id: &str, run: &Run) -> Vec<Cell> {
    let gate_status = run
        .scorecard
        .as_ref()
        .and_then(|s| s.get(0))
        .and_then(|r| r.get("status"))
        .and_then(Value::as_str)
        .map_or(Cell::Null, |s| Cell::Text(s.to_string()));
    vec![
        Cell::Text(id.to_string()),
        Cell::Text(run.table.clone()),
        Cell::Text(run.state.as_str().to_string()),
        Cell::BigInt(i64::from(run.triggers)),
        Cell::Timestamp(run.received_ms * 1000),
        run.started_ms.map_or(Cell::Null, |t| Cell::Timestamp(t * 1000)),
        run.duration_ms.map_or(Cell::Null, Cell::BigInt),
        gate_status,
        run.error.clone().map_or(Cell::Null, Cell::Text),
    ]
}

// --------------------------------------------------------------------------- the worker

fn work(shared: &Shared, config: &ServeConfig, host: &HostDb) {
    loop {
        let id = {
            let Ok(mut state) = shared.state.lock() else { return };
            loop {
                if state.stopping {
                    return;
                }
                if let Some(id) = state.queue.pop_front() {
                    break id;
                }
                let Ok((next, _)) = shared.wake.wait_timeout(state, Duration::from_millis(200)) else { return };
                state = next;
            }
        };
        let Some(run) = start(shared, &id) else { continue };
        let started = Instant::now();
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| execute(config, host, &id, &run)))
            .unwrap_or_else(|_| Err(Error::new(ErrorKind::Io, "the gate run panicked; the server goes on")));
        let Ok(mut state) = shared.state.lock() else { return };
        if let Some(run) = state.runs.get_mut(&id) {
            run.duration_ms = Some(started.elapsed().as_millis() as i64);
            match outcome {
                Ok(scorecard) => {
                    run.state = RunState::Succeeded;
                    run.scorecard = Some(scorecard);
                }
                Err(e) => {
                    run.state = RunState::Failed;
                    run.error = Some(e.to_string());
                }
            }
        }
    }
}

/// Marks `id` running (its table's queue slot frees: the next trigger queues a follow-up).
fn start(shared: &Shared, id: &str) -> Option<Run> {
    let mut state = shared.state.lock().ok()?;
    let run = state.runs.get_mut(id)?;
    run.state = RunState::Running;
    run.started_ms = Some(now_ms());
    let run = run.clone();
    if state.queued.get(&run.table).map(String::as_str) == Some(id) {
        state.queued.remove(&run.table);
    }
    Some(run)
}

/// The gate on `run.table` with its overrides, as `lakehouse_gate` runs it; the scorecard rows
/// as JSON objects.
fn execute(config: &ServeConfig, host: &HostDb, id: &str, run: &Run) -> Result<Value> {
    let mut options = config.template.clone();
    options.table = run.table.clone();
    apply_overrides(&mut options, &run.overrides)?;
    let scorecard = run_gate_as(&options, host, id)?;
    let rows = crate::functions::gate::rows(&scorecard);
    if let Some(table) = &config.history_table {
        crate::functions::gate::append_history(host, table, &rows)?;
    }
    let names: Vec<&str> = crate::functions::gate::COLUMNS.iter().map(|(n, _)| *n).collect();
    Ok(Value::Array(
        rows.iter()
            .map(|r| Value::Object(names.iter().zip(r).map(|(n, c)| (n.to_string(), cell_json(c))).collect()))
            .collect(),
    ))
}

fn cell_json(cell: &Cell) -> Value {
    match cell {
        Cell::Text(s) => json!(s),
        Cell::BigInt(n) => json!(n),
        Cell::Int(n) => json!(n),
        Cell::Double(x) if x.is_finite() => json!(x),
        Cell::Double(_) => Value::Null,
        Cell::Bool(b) => json!(b),
        Cell::Timestamp(us) => {
            chrono::DateTime::from_timestamp_micros(*us).map_or(Value::Null, |t| json!(t.to_rfc3339()))
        }
        Cell::Null => Value::Null,
    }
}

/// Checks a trigger's body: empty, or an object of [`OVERRIDES`] with numbers in range.
pub fn parse_overrides(body: &[u8]) -> std::result::Result<serde_json::Map<String, Value>, String> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(serde_json::Map::new());
    }
    let value: Value = serde_json::from_slice(body).map_err(|e| format!("the body is not valid JSON: {e}"))?;
    let Value::Object(map) = value else { return Err("the body must be a JSON object".into()) };
    for (key, value) in &map {
        if !OVERRIDES.contains(&key.as_str()) {
            return Err(format!("unknown key '{key}'; accepted: {}", OVERRIDES.join(", ")));
        }
        let Some(x) = value.as_f64() else { return Err(format!("{key} must be a number")) };
        let ok = match key.as_str() {
            "fragmentation_ratio_threshold" => (0.0..=1.0).contains(&x),
            "snapshot_retention_days" => x >= 0.0,
            _ => x > 0.0,
        };
        if !x.is_finite() || !ok {
            return Err(format!("{key} is out of range: {x}"));
        }
    }
    Ok(map)
}

fn apply_overrides(options: &mut GateOptions, overrides: &serde_json::Map<String, Value>) -> Result<()> {
    for (key, value) in overrides {
        let x = value.as_f64().unwrap_or_default();
        match key.as_str() {
            "small_file_threshold_mb" => options.compaction.thresholds.small_file_threshold_mb = x,
            "fragmentation_ratio_threshold" => options.compaction.thresholds.fragmentation_ratio_threshold = x,
            "target_file_size_mb" => options.compaction.target_file_size_mb = x,
            "snapshot_retention_days" => options.expiry.retention_days = Some(x),
            _ => {}
        }
    }
    options.compaction.validate()?;
    options.expiry.validate()
}

/// Records a trigger for `table`: joins the run waiting for it, or queues a new one. Returns the
/// execution id and whether it joined.
fn trigger(shared: &Shared, table: &str, overrides: serde_json::Map<String, Value>) -> Option<(String, bool)> {
    let mut state = shared.state.lock().ok()?;
    if state.stopping {
        return None;
    }
    if let Some(id) = state.queued.get(table).cloned()
        && let Some(run) = state.runs.get_mut(&id)
    {
        run.triggers += 1;
        if !overrides.is_empty() {
            run.overrides = overrides;
        }
        return Some((id, true));
    }
    let id = uuid::Uuid::new_v4().to_string();
    let run = Run {
        table: table.to_string(),
        state: RunState::Queued,
        triggers: 1,
        overrides,
        received_ms: now_ms(),
        started_ms: None,
        duration_ms: None,
        scorecard: None,
        error: None,
    };
    state.runs.insert(id.clone(), run);
    state.order.push(id.clone());
    state.queue.push_back(id.clone());
    state.queued.insert(table.to_string(), id.clone());
    // Forget the oldest finished runs beyond RUNS_KEPT (their rows are still returned).
    if state.runs.len() > RUNS_KEPT {
        let finished: Vec<String> = state
            .order
            .iter()
            .filter(|i| state.runs.get(*i).is_some_and(|r| matches!(r.state, RunState::Succeeded | RunState::Failed)))
            .take(state.runs.len() - RUNS_KEPT)
            .cloned()
            .collect();
        for i in finished {
            if let Some(run) = state.runs.get_mut(&i) {
                run.scorecard = None;
            }
        }
    }
    drop(state);
    shared.wake.notify_all();
    Some((id, false))
}

// --------------------------------------------------------------------------- HTTP

/// Per peer address: its connection slots and how many connections it has (served or waiting).
type Peers = Arc<Mutex<HashMap<std::net::IpAddr, PeerEntry>>>;

struct PeerEntry {
    slots: Arc<tokio::sync::Semaphore>,
    users: usize,
}

/// One connection of a peer (served or waiting for one of the peer's slots), counted while it
/// lives; the peer's entry goes with its last connection.
struct PeerTicket {
    peers: Peers,
    ip: std::net::IpAddr,
}

impl PeerTicket {
    /// A ticket for `ip` and its slots (`per_peer` of them), or `None` when it already has
    /// `per_peer` connections served and as many waiting.
    fn take(peers: &Peers, ip: std::net::IpAddr, per_peer: usize) -> Option<(PeerTicket, Arc<tokio::sync::Semaphore>)> {
        let mut open = peers.lock().ok()?;
        let entry = open
            .entry(ip)
            .or_insert_with(|| PeerEntry { slots: Arc::new(tokio::sync::Semaphore::new(per_peer)), users: 0 });
        if entry.users >= per_peer.saturating_mul(2) {
            return None;
        }
        entry.users += 1;
        Some((PeerTicket { peers: peers.clone(), ip }, entry.slots.clone()))
    }
}

impl Drop for PeerTicket {
    fn drop(&mut self) {
        if let Ok(mut open) = self.peers.lock()
            && let Some(entry) = open.get_mut(&self.ip)
        {
            entry.users -= 1;
            if entry.users == 0 {
                open.remove(&self.ip);
            }
        }
    }
}

async fn accept_loop(
    listener: tokio::net::TcpListener,
    shared: Arc<Shared>,
    stop: Arc<tokio::sync::Notify>,
    (limit, per_peer): (usize, usize),
) {
    let permits = Arc::new(tokio::sync::Semaphore::new(limit.max(1)));
    let peers: Peers = Arc::default();
    loop {
        let acquired = tokio::select! {
            p = permits.clone().acquire_owned() => p,
            () = stop.notified() => return,
        };
        let Ok(permit) = acquired else { return };
        let accepted = tokio::select! {
            a = listener.accept() => a,
            () = stop.notified() => return,
        };
        let Ok((stream, peer)) = accepted else { continue };
        // One address serves at most `per_peer` connections; as many more wait (holding no
        // server slot) up to the header timeout for one of its slots; more are closed at once.
        // So one client's idle or slow connections never hold every slot, and a burst from one
        // client is served in turn.
        let Some((ticket, slots)) = PeerTicket::take(&peers, peer.ip(), per_peer.max(1)) else { continue };
        let (shared, permits) = (shared.clone(), permits.clone());
        tokio::spawn(async move {
            let held = match slots.clone().try_acquire_owned() {
                Ok(slot) => (slot, permit),
                Err(_) => {
                    drop(permit);
                    let Ok(Ok(slot)) = tokio::time::timeout(HEADER_TIMEOUT, slots.acquire_owned()).await else {
                        return;
                    };
                    let Ok(permit) = permits.acquire_owned().await else { return };
                    (slot, permit)
                }
            };
            let _held = (held, ticket);
            let service = hyper::service::service_fn(move |req| {
                let shared = shared.clone();
                async move { Ok::<_, Infallible>(handle(&shared, req).await) }
            });
            let mut builder = hyper::server::conn::http1::Builder::new();
            // One request per connection: an idle kept-alive connection would hold a slot.
            builder.timer(hyper_util::rt::TokioTimer::new()).header_read_timeout(HEADER_TIMEOUT).keep_alive(false);
            let connection = builder.serve_connection(hyper_util::rt::TokioIo::new(stream), service);
            let _ = tokio::time::timeout(CONNECTION_TIMEOUT, connection).await;
        });
    }
}

fn reply(status: StatusCode, body: Value) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(hyper::header::CONTENT_TYPE, hyper::header::HeaderValue::from_static("application/json"));
    response
}

fn error(status: StatusCode, message: &str) -> Response<Full<Bytes>> {
    reply(status, json!({ "error": message }))
}

fn method_not_allowed(allow: &'static str) -> Response<Full<Bytes>> {
    let mut response = error(StatusCode::METHOD_NOT_ALLOWED, "method not allowed");
    response.headers_mut().insert(hyper::header::ALLOW, hyper::header::HeaderValue::from_static(allow));
    response
}

async fn handle(shared: &Shared, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let path = req.uri().path().to_string();
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    match segments.as_slice() {
        ["healthz"] => {
            if req.method() != Method::GET {
                return method_not_allowed("GET");
            }
            let mut response = Response::new(Full::new(Bytes::from_static(b"ok")));
            response
                .headers_mut()
                .insert(hyper::header::CONTENT_TYPE, hyper::header::HeaderValue::from_static("text/plain"));
            response
        }
        ["v1", "tables", table, "gate"] => {
            if req.method() != Method::POST {
                return method_not_allowed("POST");
            }
            let table = percent_encoding::percent_decode_str(table).decode_utf8_lossy().into_owned();
            if wrong_bearer(shared, req.headers()) {
                return error(StatusCode::UNAUTHORIZED, "unauthorized");
            }
            let (parts, body) = match read_body(req).await {
                Ok(read) => read,
                Err(response) => return response,
            };
            if !authenticated(shared, &parts, &body) {
                return error(StatusCode::UNAUTHORIZED, "unauthorized");
            }
            if !shared.tables.contains(&table) {
                return error(StatusCode::NOT_FOUND, "no such table is served");
            }
            let overrides = match parse_overrides(&body) {
                Ok(o) => o,
                Err(message) => return error(StatusCode::BAD_REQUEST, &message),
            };
            match trigger(shared, &table, overrides) {
                Some((id, coalesced)) => {
                    reply(StatusCode::ACCEPTED, json!({ "execution_id": id, "coalesced": coalesced }))
                }
                None => error(StatusCode::SERVICE_UNAVAILABLE, "the server is stopping"),
            }
        }
        ["v1", "runs", id] => {
            if req.method() != Method::GET {
                return method_not_allowed("GET");
            }
            let id = id.to_string();
            if wrong_bearer(shared, req.headers()) {
                return error(StatusCode::UNAUTHORIZED, "unauthorized");
            }
            let (parts, body) = match read_body(req).await {
                Ok(read) => read,
                Err(response) => return response,
            };
            if !authenticated(shared, &parts, &body) {
                return error(StatusCode::UNAUTHORIZED, "unauthorized");
            }
            let Ok(state) = shared.state.lock() else { return error(StatusCode::INTERNAL_SERVER_ERROR, "state") };
            match state.runs.get(&id) {
                Some(run) => reply(
                    StatusCode::OK,
                    json!({
                        "execution_id": id,
                        "table": run.table,
                        "status": run.state.as_str(),
                        "triggers": run.triggers,
                        "duration_ms": run.duration_ms,
                        "error": run.error,
                        "scorecard": run.scorecard,
                    }),
                ),
                None => error(StatusCode::NOT_FOUND, "no such run"),
            }
        }
        _ => error(StatusCode::NOT_FOUND, "not found"),
    }
}

/// The request's head and its body, at most [`MAX_BODY_BYTES`] (413 beyond, 400 when it breaks
/// off), within [`BODY_TIMEOUT`] (408 after).
async fn read_body(
    req: Request<Incoming>,
) -> std::result::Result<(hyper::http::request::Parts, Bytes), Response<Full<Bytes>>> {
    let too_large = || error(StatusCode::PAYLOAD_TOO_LARGE, "the body is larger than 64 KiB");
    let declared = req
        .headers()
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_BODY_BYTES as u64) {
        return Err(too_large());
    }
    let (parts, body) = req.into_parts();
    let Ok(collected) = tokio::time::timeout(BODY_TIMEOUT, Limited::new(body, MAX_BODY_BYTES).collect()).await else {
        return Err(error(StatusCode::REQUEST_TIMEOUT, "the body was not sent in time"));
    };
    match collected {
        Ok(collected) => Ok((parts, collected.to_bytes())),
        Err(e) if e.downcast_ref::<http_body_util::LengthLimitError>().is_some() => Err(too_large()),
        Err(_) => Err(error(StatusCode::BAD_REQUEST, "the body could not be read")),
    }
}

/// The timestamp before which (inclusive) a server started at `started_s` refuses signed
/// requests: the latest its predecessor, stopped before it started, can have accepted (its clock
/// then, plus [`SIGNATURE_FUTURE_S`]). So no signature seen before a restart is accepted after
/// it, with nothing persisted; a signed request in the first seconds after a start is refused.
pub fn not_before_s(started_s: i64) -> i64 {
    started_s + SIGNATURE_FUTURE_S
}

/// What a signature signs: the timestamp, the method, the request target (path and query as
/// sent) and the body — `"{timestamp}\n{METHOD}\n{target}\n{body}"`. None of the first three
/// can hold a newline, so no two requests share a string (and none is the old
/// `"{timestamp}.{body}"`, which signed neither method nor URL).
pub fn string_to_sign(timestamp: &str, method: &str, target: &str, body: &[u8]) -> Vec<u8> {
    let mut message = Vec::with_capacity(timestamp.len() + method.len() + target.len() + 3 + body.len());
    for part in [timestamp, method, target] {
        message.extend_from_slice(part.as_bytes());
        message.push(b'\n');
    }
    message.extend_from_slice(body);
    message
}

/// Whether `ts` is a timestamp a signed request may carry at `now_s`.
fn fresh(ts: i64, now_s: i64, not_before_s: i64) -> bool {
    ts > not_before_s && ts >= now_s - SIGNATURE_WINDOW_S && ts <= now_s + SIGNATURE_FUTURE_S
}

/// A bearer key is presented and is not the key (refused before the body is read).
fn wrong_bearer(shared: &Shared, headers: &hyper::HeaderMap) -> bool {
    bearer(headers).is_some_and(|token| !bearer_matches(shared, token))
}

fn bearer(headers: &hyper::HeaderMap) -> Option<&str> {
    headers.get("authorization").and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "))
}

fn bearer_matches(shared: &Shared, token: &str) -> bool {
    hmac::verify(&shared.key.bearer, token.trim().as_bytes(), shared.key.bearer_tag.as_ref()).is_ok()
}

/// Bearer token or a fresh, unseen HMAC signature over [`string_to_sign`] of this request.
fn authenticated(shared: &Shared, parts: &hyper::http::request::Parts, body: &[u8]) -> bool {
    if let Some(token) = bearer(&parts.headers) {
        return bearer_matches(shared, token);
    }
    let header = |name: &str| parts.headers.get(name).and_then(|v| v.to_str().ok());
    let (Some(signature), Some(timestamp)) = (header("x-lakehouse-signature"), header("x-lakehouse-timestamp")) else {
        return false;
    };
    let Some(tag) = signature.strip_prefix("sha256=").and_then(|h| hex::decode(h.trim()).ok()) else { return false };
    let Ok(ts) = timestamp.trim().parse::<i64>() else { return false };
    let now = now_ms() / 1000;
    if !fresh(ts, now, shared.not_before_s) {
        return false;
    }
    let target = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let message = string_to_sign(timestamp.trim(), parts.method.as_str(), target, body);
    if hmac::verify(&shared.key.signing, &message, &tag).is_err() {
        return false;
    }
    // A valid signature is accepted once.
    let Ok(mut seen) = shared.seen.lock() else { return false };
    seen.retain(|_, t| *t >= now - SIGNATURE_WINDOW_S);
    seen.insert(hex::encode(&tag), ts).is_none()
}

// --------------------------------------------------------------------------- SIGTERM

static TERMINATED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigterm(_sig: libc::c_int) {
    TERMINATED.store(true, Ordering::SeqCst);
}

/// While alive, SIGTERM is recorded (the server stops) instead of ending the process; the
/// host's disposition comes back when it drops.
struct TermGuard {
    previous: Option<libc::sigaction>,
}

impl TermGuard {
    fn new() -> Self {
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

    fn received(&self) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_are_checked_like_the_sql_parameters() {
        assert!(parse_overrides(b"").unwrap().is_empty());
        assert!(parse_overrides(b"  \n").unwrap().is_empty());
        let ok = parse_overrides(br#"{"small_file_threshold_mb": 32, "snapshot_retention_days": 0}"#).unwrap();
        assert_eq!(ok.len(), 2);
        for (body, want) in [
            (&br#"{"table": "/etc"}"#[..], "unknown key 'table'"),
            (br#"{"small_file_threshold_mb": -1}"#, "out of range"),
            (br#"{"fragmentation_ratio_threshold": 1.5}"#, "out of range"),
            (br#"{"target_file_size_mb": "big"}"#, "must be a number"),
            (br#"[1, 2]"#, "must be a JSON object"),
            (br#"{"small_file"#, "not valid JSON"),
        ] {
            let err = parse_overrides(body).unwrap_err();
            assert!(err.contains(want), "{err}");
        }
    }

    fn shared(tables: &[&str]) -> Shared {
        Shared {
            key: Key::new(b"0123456789abcdef-secret"),
            tables: tables.iter().map(|t| t.to_string()).collect(),
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
            seen: Mutex::new(HashMap::new()),
            not_before_s: not_before_s(now_ms() / 1000 - 60),
        }
    }

    #[test]
    fn a_burst_of_triggers_queues_one_run_and_one_follow_up() {
        let s = shared(&["t"]);
        let (first, joined) = trigger(&s, "t", Default::default()).unwrap();
        assert!(!joined);
        for _ in 0..50 {
            assert_eq!(trigger(&s, "t", Default::default()).unwrap(), (first.clone(), true));
        }
        // The worker starts it: the next trigger queues exactly one follow-up.
        let id = s.state.lock().unwrap().queue.pop_front().unwrap();
        start(&s, &id).unwrap();
        let (follow_up, joined) = trigger(&s, "t", Default::default()).unwrap();
        assert!(!joined && follow_up != first);
        for _ in 0..50 {
            assert_eq!(trigger(&s, "t", Default::default()).unwrap(), (follow_up.clone(), true));
        }
        let state = s.state.lock().unwrap();
        assert_eq!(state.runs.len(), 2);
        assert_eq!(state.runs[&first].triggers, 51);
        assert_eq!(state.queue.len(), 1);
    }

    fn parts(method: &str, target: &str, headers: &[(&str, String)]) -> hyper::http::request::Parts {
        let mut builder = Request::builder().method(method).uri(target);
        for (name, value) in headers {
            builder = builder.header(*name, value);
        }
        builder.body(()).unwrap().into_parts().0
    }

    fn signature(key: &[u8], ts: i64, method: &str, target: &str, body: &[u8]) -> Vec<(&'static str, String)> {
        let tag =
            hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, key), &string_to_sign(&ts.to_string(), method, target, body));
        vec![
            ("x-lakehouse-timestamp", ts.to_string()),
            ("x-lakehouse-signature", format!("sha256={}", hex::encode(tag))),
        ]
    }

    /// A signature is good for its method, request target and body only, once, and only when
    /// timestamped after the server's start (its predecessor's signatures), within the window.
    #[test]
    fn a_signature_covers_method_target_and_body_once() {
        let s = shared(&["a", "b"]);
        let key = b"0123456789abcdef-secret";
        let now = now_ms() / 1000;
        let (gate_a, gate_b) = ("/v1/tables/a/gate", "/v1/tables/b/gate");
        let signed = signature(key, now, "POST", gate_a, b"{}");
        for (method, target, body) in [
            ("POST", gate_b, &b"{}"[..]),
            ("GET", gate_a, b"{}"),
            ("POST", gate_a, b"{} "),
            ("POST", "/v1/tables/a/gate?x=1", b"{}"),
        ] {
            assert!(!authenticated(&s, &parts(method, target, &signed), body), "{method} {target}");
        }
        assert!(authenticated(&s, &parts("POST", gate_a, &signed), b"{}"));
        assert!(!authenticated(&s, &parts("POST", gate_a, &signed), b"{}"), "a replay");
        // A GET's signature is no trigger.
        let get = signature(key, now, "GET", "/v1/runs/x", b"");
        assert!(!authenticated(&s, &parts("POST", gate_a, &get), b""));
        assert!(authenticated(&s, &parts("GET", "/v1/runs/x", &get), b""));
        // The old string, `timestamp.body`, is refused.
        let old = hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, key), format!("{now}.{{}}").as_bytes());
        let old = vec![
            ("x-lakehouse-timestamp", now.to_string()),
            ("x-lakehouse-signature", format!("sha256={}", hex::encode(old))),
        ];
        assert!(!authenticated(&s, &parts("POST", gate_a, &old), b"{}"));
        for ts in [now - SIGNATURE_WINDOW_S - 1, now + SIGNATURE_FUTURE_S + 2] {
            assert!(!authenticated(&s, &parts("POST", gate_a, &signature(key, ts, "POST", gate_a, b"")), b""), "{ts}");
        }
        // Signed before a restart: refused by the new server whatever its window says.
        let restarted = Shared { not_before_s: not_before_s(now), ..shared(&["a"]) };
        for ts in [now - 10, now, now + SIGNATURE_FUTURE_S] {
            assert!(!authenticated(&restarted, &parts("POST", gate_a, &signature(key, ts, "POST", gate_a, b"")), b""));
        }
        // A second after the start, a client a few seconds ahead gets through.
        assert!(fresh(now + SIGNATURE_FUTURE_S + 1, now + 1, not_before_s(now)));
    }

    #[test]
    fn the_string_to_sign_separates_its_parts() {
        assert_eq!(
            string_to_sign("1700000000", "POST", "/v1/tables/a.b/gate", b"{}"),
            b"1700000000\nPOST\n/v1/tables/a.b/gate\n{}"
        );
        // Unambiguous because a request target holds no newline (nor does a method or a number).
        assert!("/a\nb".parse::<hyper::Uri>().is_err());
    }

    #[test]
    fn a_peer_holds_at_most_its_limit_of_connections_and_as_many_waiting() {
        let peers: Peers = Arc::default();
        let (a, b) = ("127.0.0.2".parse().unwrap(), "127.0.0.3".parse().unwrap());
        let first = PeerTicket::take(&peers, a, 1).unwrap();
        let _slot = first.1.clone().try_acquire_owned().unwrap();
        let (_waiting, slots) = PeerTicket::take(&peers, a, 1).unwrap();
        assert!(slots.try_acquire_owned().is_err(), "the peer's one slot is taken");
        assert!(PeerTicket::take(&peers, a, 1).is_none(), "one served and one waiting: no more");
        let _other = PeerTicket::take(&peers, b, 1).unwrap();
        drop(first);
        let _third = PeerTicket::take(&peers, a, 1).unwrap();
        assert_eq!(peers.lock().unwrap()[&a].users, 2);
        drop((_waiting, _third, _other));
        assert!(peers.lock().unwrap().is_empty());
    }
}
