//! What the webhook server's parts share: its configuration, the key, the runs' state (one
//! [`Shared`] behind an `Arc`) and the clock. The parts — [`super::auth`], [`super::runs`],
//! [`super::http`] — use this module, not each other's state.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Condvar, Mutex};

use ring::hmac;
use serde_json::Value;

use crate::action::gate::GateOptions;
use crate::functions::gate_runs::history::History;

/// What `lakehouse_serve` was asked to do.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Where to listen.
    pub listen: SocketAddr,
    /// Tables a trigger may name.
    pub tables: Vec<String>,
    /// The gate's options (its `table` is replaced per run).
    pub template: GateOptions,
    /// Where each run's rows go (failed runs too).
    pub history: History,
    /// Stop when the process that started this one goes away (`super::signals::ParentWatch`).
    pub stop_with_parent: bool,
    /// Connections served at once.
    pub max_connections: usize,
    /// Connections served at once from one peer address.
    pub max_connections_per_peer: usize,
}

/// The server's state, shared by the accept loop, the connections and the worker.
pub(super) struct Shared {
    pub(super) key: Key,
    pub(super) tables: BTreeSet<String>,
    /// The gate's options: a trigger's overrides are applied to them and checked before its 202.
    pub(super) template: GateOptions,
    pub(super) state: Mutex<State>,
    pub(super) wake: Condvar,
    /// Signatures seen within the window (replay protection), with their timestamps.
    pub(super) seen: Mutex<HashMap<String, i64>>,
    /// Signed requests must be timestamped after this (`super::auth::not_before_s`).
    pub(super) not_before_s: i64,
}

/// Now, ms since the epoch.
pub(super) fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// The shared key, as given and as HMAC keys.
pub(super) struct Key {
    pub(super) signing: hmac::Key,
    /// A per-process key under which presented bearer tokens are compared with the real one.
    pub(super) bearer: hmac::Key,
    pub(super) bearer_tag: hmac::Tag,
}

impl Key {
    pub(super) fn new(secret: &[u8]) -> Self {
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
    pub(super) fn as_str(self) -> &'static str {
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
pub(super) struct Run {
    pub(super) table: String,
    pub(super) state: RunState,
    pub(super) triggers: u32,
    pub(super) overrides: serde_json::Map<String, Value>,
    pub(super) received_ms: i64,
    pub(super) started_ms: Option<i64>,
    pub(super) duration_ms: Option<i64>,
    pub(super) scorecard: Option<Value>,
    pub(super) error: Option<String>,
}

#[derive(Default)]
pub(super) struct State {
    pub(super) runs: HashMap<String, Run>,
    /// Every run, in the order it was first triggered.
    pub(super) order: Vec<String>,
    /// Runs waiting for the worker.
    pub(super) queue: VecDeque<String>,
    /// Per table: the run waiting to start, if any.
    pub(super) queued: HashMap<String, String>,
    pub(super) stopping: bool,
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::functions::serve::auth::not_before_s;

    /// A server's shared state serving `tables`, started a minute ago.
    pub(in crate::functions::serve) fn shared(tables: &[&str]) -> Shared {
        Shared {
            key: Key::new(b"0123456789abcdef-secret"),
            tables: tables.iter().map(|t| t.to_string()).collect(),
            template: GateOptions::default(),
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
            seen: Mutex::new(HashMap::new()),
            not_before_s: not_before_s(now_ms() / 1000 - 60),
        }
    }
}
