//! `lakehouse_gate(table, small_file_threshold_mb := 64, fragmentation_ratio_threshold := 0.35,
//! snapshot_retention_days := 7, target_file_size_mb := 128, slack_webhook_url := NULL,
//! dry_run := false, …)`: the whole maintenance gate; the itemized scorecard, one row per
//! partition with the table-level figures on every row.

use duckdb::core::{LogicalTypeHandle, LogicalTypeId};

use super::args::{Args, named};
use super::gate_runs::history::{self, Failure, History};
use super::gate_runs::scorecard_rows::{COLUMNS, rows};
use super::options::gate::{gate_options, gate_parameter_names};
use super::{Cell, RowFunction};
use crate::action::gate::{GateOptions, run_gate_as};
use crate::duck::HostDb;
use crate::error::{Error, Result};

/// Parsed arguments.
pub struct GateInput {
    options: GateOptions,
    history: History,
}

/// The gate table function.
pub struct Gate;

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
