//! `lakehouse_gate(table, small_file_threshold_mb := 64, fragmentation_ratio_threshold := 0.35,
//! snapshot_retention_days := 7, target_file_size_mb := 128, slack_webhook_url := NULL,
//! dry_run := false, …)`: the whole maintenance gate; the itemized scorecard, one row per
//! partition with the table-level figures on every row.

use duckdb::core::{LogicalTypeHandle, LogicalTypeId};

use super::args::{Args, TABLE_PARAMETERS, THRESHOLD_PARAMETERS, named};
use super::compact::{COMPACTION_PARAMETERS, EXECUTOR_PARAMETERS, compaction_options, executor_options};
use super::expire_snapshots::{EXPIRY_PARAMETERS, expiry_options};
use super::history::{self, Failure, History, history_options};
use super::scorecard_rows::{COLUMNS, rows};
use super::{Cell, RowFunction};
use crate::action::gate::{GateOptions, run_gate_as};
use crate::duck::HostDb;
use crate::error::{Error, Result};
use crate::notify::slack::{RetryPolicy, Webhook};
use crate::plan::format_options::FormatOnly;

/// Parsed arguments.
pub struct GateInput {
    options: GateOptions,
    history: History,
}

/// The gate table function.
pub struct Gate;

const GATE_PARAMETERS: [&str; 8] = [
    "slack_webhook_url",
    "dry_run",
    "notify_when_healthy",
    "fail_on_notify_error",
    "measure_speedup",
    "history_table",
    "history_path",
    "notify_max_attempts",
];

/// Every named parameter of the gate (also `lakehouse_serve`'s, beside its own).
pub(crate) fn gate_parameter_names() -> Vec<&'static str> {
    let mut names = THRESHOLD_PARAMETERS.to_vec();
    names.extend(COMPACTION_PARAMETERS);
    names.extend(EXECUTOR_PARAMETERS);
    names.extend(EXPIRY_PARAMETERS);
    names.extend(GATE_PARAMETERS);
    names.extend(TABLE_PARAMETERS);
    names
}

/// The gate's options for `table` and where its runs are recorded, from the named parameters.
pub(crate) fn gate_options(args: &Args, table: String) -> Result<(GateOptions, History)> {
    let dry_run = args.bool("dry_run", false)?;
    let webhook = Webhook::resolve(args.opt_string("slack_webhook_url", true)?.as_deref())?;
    let history = history_options(args)?;
    let retry =
        RetryPolicy { max_attempts: args.i64_in("notify_max_attempts", 4, 1, 10)? as u32, ..RetryPolicy::default() };
    let options = GateOptions {
        table,
        locate: args.locate_options()?,
        compaction: compaction_options(args, true)?,
        executor: executor_options(args)?,
        expiry: expiry_options(args, dry_run)?,
        dry_run,
        webhook,
        notify_when_healthy: args.bool("notify_when_healthy", false)?,
        fail_on_notify_error: args.bool("fail_on_notify_error", false)?,
        measure_speedup: args.bool("measure_speedup", true)?,
        retry,
        format_only: FormatOnly::given(|name| args.given(name)),
    };
    Ok((options, history))
}

impl RowFunction for Gate {
    const NAME: &'static str = "lakehouse_gate";
    const LONG: bool = true;
    type Input = GateInput;

    fn named_parameters() -> Vec<(String, LogicalTypeHandle)> {
        named(&gate_parameter_names())
    }

    fn columns() -> Vec<(&'static str, LogicalTypeId)> {
        COLUMNS.to_vec()
    }

    fn parse(args: &Args) -> Result<Self::Input> {
        let table = args.required_string(0, "table")?;
        let (options, history) = gate_options(args, table)?;
        Ok(GateInput { options, history })
    }

    fn run(input: &Self::Input, host: &HostDb) -> Result<Vec<Vec<Cell>>> {
        let execution_id = uuid::Uuid::new_v4().to_string();
        let (started_ms, started) = (chrono::Utc::now().timestamp_millis(), std::time::Instant::now());
        let scorecard = match run_gate_as(&input.options, host, &execution_id) {
            Ok(scorecard) => scorecard,
            Err(e) => {
                // A failed run is recorded too (its alert, when a webhook is set, is posted).
                let error = e.to_string();
                let row = history::failed(&Failure {
                    execution_id: &execution_id,
                    table: &input.options.table,
                    dry_run: input.options.dry_run,
                    started_ms,
                    duration_ms: started.elapsed().as_millis() as i64,
                    error: &error,
                });
                return Err(match history::record(host, &input.history, &execution_id, &[row]) {
                    Ok(()) => e,
                    Err(h) => Error::new(e.kind(), format!("{error} (and the run could not be recorded: {h})")),
                });
            }
        };
        let rows = rows(&scorecard);
        history::record(host, &input.history, &execution_id, &history::finished(&rows)).map_err(|e| {
            Error::new(
                e.kind(),
                format!("maintenance finished (execution {execution_id}) but its history could not be written: {e}"),
            )
        })?;
        Ok(rows)
    }
}
