//! The webhook server's HTTP side: accepting connections within the limits (per server and per
//! peer address), the timeouts, one request per connection, and the routes — `POST
//! /v1/tables/{table}/gate` (authenticated, allow-listed, overrides checked as the SQL
//! parameters are before the 202), `GET /v1/runs/{id}`, `GET /healthz`.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{Value, json};

use super::auth::{authenticated, wrong_bearer};
use super::runs::{apply_overrides, parse_overrides, trigger};
use super::state::Shared;

/// Largest request body accepted.
pub const MAX_BODY_BYTES: usize = 64 * 1024;
/// Time allowed to send the request headers.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(5);
/// Time allowed to send the request body (after the headers).
pub const BODY_TIMEOUT: Duration = Duration::from_secs(5);
/// Time allowed for a whole connection.
const CONNECTION_TIMEOUT: Duration = Duration::from_secs(30);

/// Per peer address: its connection slots and how many connections it has (served or waiting).
pub(super) type Peers = Arc<Mutex<HashMap<std::net::IpAddr, PeerEntry>>>;

pub(super) struct PeerEntry {
    slots: Arc<tokio::sync::Semaphore>,
    users: usize,
}

/// One connection of a peer (served or waiting for one of the peer's slots), counted while it
/// lives; the peer's entry goes with its last connection.
pub(super) struct PeerTicket {
    peers: Peers,
    ip: std::net::IpAddr,
}

impl PeerTicket {
    /// A ticket for `ip` and its slots (`per_peer` of them), or `None` when it already has
    /// `per_peer` connections served and as many waiting.
    pub(super) fn take(
        peers: &Peers,
        ip: std::net::IpAddr,
        per_peer: usize,
    ) -> Option<(PeerTicket, Arc<tokio::sync::Semaphore>)> {
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

pub(super) async fn accept_loop(
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

pub(super) fn reply(status: StatusCode, body: Value) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(hyper::header::CONTENT_TYPE, hyper::header::HeaderValue::from_static("application/json"));
    response
}

pub(super) fn error(status: StatusCode, message: &str) -> Response<Full<Bytes>> {
    reply(status, json!({ "error": message }))
}

pub(super) fn method_not_allowed(allow: &'static str) -> Response<Full<Bytes>> {
    let mut response = error(StatusCode::METHOD_NOT_ALLOWED, "method not allowed");
    response.headers_mut().insert(hyper::header::ALLOW, hyper::header::HeaderValue::from_static(allow));
    response
}

pub(super) async fn handle(shared: &Shared, req: Request<Incoming>) -> Response<Full<Bytes>> {
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
            let body = match authenticated_body(shared, req).await {
                Ok(body) => body,
                Err(response) => return response,
            };
            if !shared.tables.contains(&table) {
                return error(StatusCode::NOT_FOUND, "no such table is served");
            }
            let overrides = match parse_overrides(&body) {
                Ok(o) => o,
                Err(message) => return error(StatusCode::BAD_REQUEST, &message),
            };
            // Checked with the server's other options, as lakehouse_gate checks its parameters:
            // a trigger the gate would refuse gets 400, not a 202 for a run bound to fail.
            if let Err(e) = apply_overrides(&mut shared.template.clone(), &overrides) {
                return error(StatusCode::BAD_REQUEST, e.message());
            }
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
            if let Err(response) = authenticated_body(shared, req).await {
                return response;
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

/// The body of an authenticated request: a wrong bearer key is refused before the body is read,
/// a signature checked over it (401 either way, saying nothing more).
async fn authenticated_body(
    shared: &Shared,
    req: Request<Incoming>,
) -> std::result::Result<Bytes, Response<Full<Bytes>>> {
    if wrong_bearer(shared, req.headers()) {
        return Err(error(StatusCode::UNAUTHORIZED, "unauthorized"));
    }
    let (parts, body) = read_body(req).await?;
    if !authenticated(shared, &parts, &body) {
        return Err(error(StatusCode::UNAUTHORIZED, "unauthorized"));
    }
    Ok(body)
}

/// The request's head and its body, at most [`MAX_BODY_BYTES`] (413 beyond, 400 when it breaks
/// off), within [`BODY_TIMEOUT`] (408 after).
pub(super) async fn read_body(
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

#[cfg(test)]
mod tests {
    use super::*;

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
