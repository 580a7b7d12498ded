//! The runs of the webhook server: the queue (per table at most one run waits; triggers that
//! arrive meanwhile join it, the latest overrides winning), the one worker that runs the gates
//! one at a time (every failure alerts and is recorded), a trigger's overrides (checked before
//! its 202) and the rows `lakehouse_serve` returns.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::state::{Run, RunState, ServeConfig, Shared, now_ms};
use crate::action::gate::{GateOptions, alert_failure, run_gate_as};
use crate::duck::HostDb;
use crate::error::{Error, ErrorKind, Result};
use crate::functions::Cell;
use crate::functions::gate_runs::history::{self, Failure};

/// Runs remembered for `GET /v1/runs/{id}` (older ones are forgotten first).
const RUNS_KEPT: usize = 1000;
/// Threshold overrides a trigger may send.
pub const OVERRIDES: [&str; 4] =
    ["small_file_threshold_mb", "fragmentation_ratio_threshold", "target_file_size_mb", "snapshot_retention_days"];

pub(super) fn row(id: &str, run: &Run) -> Vec<Cell> {
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

pub(super) fn work(shared: &Shared, config: &ServeConfig, host: &HostDb) {
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
            .unwrap_or_else(|_| {
                let panicked = Error::new(ErrorKind::Io, "the gate run panicked; the server goes on");
                Err(alert_failure(&options_for(config, &run), &id, panicked))
            });
        if let Err(e) = &outcome {
            record_failure(config, host, &id, &run, started, e);
        }
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
pub(super) fn start(shared: &Shared, id: &str) -> Option<Run> {
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

/// The server's gate options for `run` (its table; its overrides are applied by [`execute`]).
pub(super) fn options_for(config: &ServeConfig, run: &Run) -> GateOptions {
    GateOptions { table: run.table.clone(), ..config.template.clone() }
}

/// A failed run's history row (a history that cannot be written is reported on stderr: the
/// run's own error stands).
pub(super) fn record_failure(config: &ServeConfig, host: &HostDb, id: &str, run: &Run, started: Instant, e: &Error) {
    let error = e.to_string();
    let row = history::failed(&Failure {
        execution_id: id,
        table: &run.table,
        dry_run: config.template.dry_run,
        started_ms: run.started_ms.unwrap_or_else(now_ms),
        duration_ms: started.elapsed().as_millis() as i64,
        error: &error,
    });
    if let Err(h) = history::record(host, &config.history, id, &[row]) {
        eprintln!("lakehouse_serve: run {id} failed and could not be recorded: {h}");
    }
}

/// The gate on `run.table` with its overrides, as `lakehouse_gate` runs it; the scorecard rows
/// as JSON objects. Every failure has posted its alert (when a webhook is set) when this returns.
pub(super) fn execute(config: &ServeConfig, host: &HostDb, id: &str, run: &Run) -> Result<Value> {
    let mut options = options_for(config, run);
    if let Err(e) = apply_overrides(&mut options, &run.overrides) {
        return Err(alert_failure(&options, id, e));
    }
    let scorecard = run_gate_as(&options, host, id)?;
    let rows = crate::functions::gate_runs::scorecard_rows::rows(&scorecard);
    if let Err(e) = history::record(host, &config.history, id, &history::finished(&rows)) {
        let e = Error::new(e.kind(), format!("maintenance finished but its history could not be written: {e}"));
        return Err(alert_failure(&options, id, e));
    }
    let names: Vec<&str> = crate::functions::gate_runs::scorecard_rows::COLUMNS.iter().map(|(n, _)| *n).collect();
    Ok(Value::Array(
        rows.iter()
            .map(|r| Value::Object(names.iter().zip(r).map(|(n, c)| (n.to_string(), cell_json(c))).collect()))
            .collect(),
    ))
}

pub(super) fn cell_json(cell: &Cell) -> Value {
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

/// Checks a trigger's body: empty, or an object of `OVERRIDES` with numbers in range.
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

pub(super) fn apply_overrides(options: &mut GateOptions, overrides: &serde_json::Map<String, Value>) -> Result<()> {
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
pub(super) fn trigger(
    shared: &Shared,
    table: &str,
    overrides: serde_json::Map<String, Value>,
) -> Option<(String, bool)> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::functions::serve::state::tests::shared;

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
}
