//! `lakehouse_gate(table, small_file_threshold_mb := 64, fragmentation_ratio_threshold := 0.35,
//! snapshot_retention_days := 7, target_file_size_mb := 128, slack_webhook_url := NULL,
//! dry_run := false, …)`: the whole maintenance gate; the itemized scorecard, one row per
//! partition with the table-level figures on every row.

use duckdb::core::{LogicalTypeHandle, LogicalTypeId};

use super::args::{Args, TABLE_PARAMETERS, THRESHOLD_PARAMETERS, named};
use super::compact::{COMPACTION_PARAMETERS, EXECUTOR_PARAMETERS, compaction_options, executor_options};
use super::expire_snapshots::{EXPIRY_PARAMETERS, expiry_options};
use super::{Cell, RowFunction};
use crate::action::gate::{GateOptions, run_gate};
use crate::duck::{HostDb, quote_ident, quote_literal};
use crate::error::{Error, Result};
use crate::notify::slack::{RetryPolicy, Webhook};
use crate::profile::{MIB, round_mb, round_ratio, round_to};
use crate::report::Scorecard;

/// Parsed arguments.
pub struct GateInput {
    options: GateOptions,
    history_table: Option<String>,
}

/// The gate table function.
pub struct Gate;

const GATE_PARAMETERS: [&str; 7] = [
    "slack_webhook_url",
    "dry_run",
    "notify_when_healthy",
    "fail_on_notify_error",
    "measure_speedup",
    "history_table",
    "notify_max_attempts",
];

/// `name` or `schema.name` or `catalog.schema.name`, each part quoted.
pub fn qualified_name(text: &str) -> Result<String> {
    let parts: Vec<&str> = text.split('.').map(str::trim).collect();
    if parts.len() > 3 || parts.iter().any(|p| p.is_empty()) {
        return Err(Error::invalid(format!(
            "history_table must be a table name, optionally qualified (schema.table), got '{text}'"
        )));
    }
    Ok(parts.iter().map(|p| quote_ident(p)).collect::<Vec<_>>().join("."))
}

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

/// The gate's options for `table` and the quoted history table, from the named parameters.
pub(crate) fn gate_options(args: &Args, table: String) -> Result<(GateOptions, Option<String>)> {
    let dry_run = args.bool("dry_run", false)?;
    let webhook = Webhook::resolve(args.opt_string("slack_webhook_url", true)?.as_deref())?;
    let history_table = args.opt_string("history_table", false)?.map(|t| qualified_name(&t)).transpose()?;
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
    };
    Ok((options, history_table))
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
        let (options, history_table) = gate_options(args, table)?;
        Ok(GateInput { options, history_table })
    }

    fn run(input: &Self::Input, host: &HostDb) -> Result<Vec<Vec<Cell>>> {
        let scorecard = run_gate(&input.options, host)?;
        let rows = rows(&scorecard);
        if let Some(table) = &input.history_table {
            append_history(host, table, &rows).map_err(|e| {
                Error::new(
                    e.kind(),
                    format!(
                        "maintenance finished (execution {}) but the history table could not be written: {e}",
                        scorecard.execution_id
                    ),
                )
            })?;
        }
        Ok(rows)
    }
}

/// The scorecard's columns (also the history table's).
pub const COLUMNS: [(&str, LogicalTypeId); 48] = {
    use LogicalTypeId::*;
    [
        ("execution_id", Varchar),
        ("table_name", Varchar),
        ("status", Varchar),
        ("partition", Varchar),
        ("spec_id", Integer),
        ("verdict", Varchar),
        ("reason", Varchar),
        ("action", Varchar),
        ("files_before", Bigint),
        ("files_after", Bigint),
        ("small_files_before", Bigint),
        ("small_files_after", Bigint),
        ("fragmentation_ratio_before", Double),
        ("fragmentation_ratio_after", Double),
        ("mb_consolidated", Double),
        ("partitions_total", Bigint),
        ("partitions_degraded", Bigint),
        ("partitions_compacted", Bigint),
        ("small_files_eliminated", Bigint),
        ("volume_consolidated_mb", Double),
        ("scan_before_ms", Double),
        ("scan_after_ms", Double),
        ("measured_speedup", Double),
        ("projected_speedup_low", Double),
        ("projected_speedup_high", Double),
        ("compaction_snapshot_id", Bigint),
        ("snapshots_expired", Bigint),
        ("files_deleted", Bigint),
        ("bytes_reclaimed", Bigint),
        ("snapshot_retention_days", Double),
        ("notification", Varchar),
        ("dry_run", Boolean),
        ("started_at", Timestamp),
        ("duration_ms", Bigint),
        ("avg_fragmentation_ratio_after", Double),
        ("manifests_merged", Bigint),
        ("manifest_snapshot_id", Bigint),
        ("scan_sample_share", Double),
        ("executor", Varchar),
        ("executor_reason", Varchar),
        ("strategy", Varchar),
        ("warnings", Varchar),
        ("rows_purged", Bigint),
        ("delete_files_rewritten", Bigint),
        ("delete_rewrite_snapshot_id", Bigint),
        ("commit", Varchar),
        ("file_sizes_before", Varchar),
        ("file_sizes_after", Varchar),
    ]
};

fn big(n: u64) -> Cell {
    Cell::BigInt(n as i64)
}

/// The scorecard as rows: one per partition (one with a NULL partition for a table without data).
pub fn rows(card: &Scorecard) -> Vec<Vec<Cell>> {
    let ms = |s: &Option<crate::report::ScanResult>| {
        s.as_ref().map_or(Cell::Null, |s| Cell::Double(round_to(s.elapsed.as_secs_f64() * 1000.0, 2)))
    };
    let table_level = |row: &mut Vec<Cell>| {
        row.extend([
            big(card.partitions.len() as u64),
            big(card.partitions_degraded),
            big(card.partitions_compacted),
            big(card.small_files_eliminated),
            Cell::Double(round_mb(card.bytes_consolidated as f64 / MIB)),
            ms(&card.scan_before),
            ms(&card.scan_after),
            card.measured_speedup().map_or(Cell::Null, |x| Cell::Double(round_to(x, 2))),
            Cell::Double(round_to(card.projected_speedup_low, 2)),
            Cell::Double(round_to(card.projected_speedup_high, 2)),
            card.compaction_snapshot_id.map_or(Cell::Null, Cell::BigInt),
            big(card.snapshots_expired),
            big(card.files_deleted),
            big(card.bytes_reclaimed),
            Cell::Double(card.retention_days),
            Cell::Text(card.notification.clone()),
            Cell::Bool(card.dry_run),
            Cell::Timestamp(card.started_ms.saturating_mul(1000)),
            big(card.duration_ms),
            Cell::Double(round_ratio(card.avg_ratio_after)),
            big(card.manifests_merged),
            card.manifest_snapshot_id.map_or(Cell::Null, Cell::BigInt),
            Cell::Double(round_ratio(card.scan_share)),
        ]);
    };
    let warnings = || if card.warnings.is_empty() { Cell::Null } else { Cell::Text(card.warnings.join("; ")) };
    let deletes =
        || [big(card.delete_files_rewritten), card.delete_rewrite_snapshot_id.map_or(Cell::Null, Cell::BigInt)];
    let head = || {
        vec![
            Cell::Text(card.execution_id.clone()),
            Cell::Text(card.table.clone()),
            Cell::Text(card.status.as_str().into()),
        ]
    };
    if card.partitions.is_empty() {
        let mut row = head();
        row.extend((0..12).map(|_| Cell::Null));
        table_level(&mut row);
        row.extend([Cell::Null, Cell::Null, Cell::Null, warnings(), Cell::Null]);
        row.extend(deletes());
        row.extend([Cell::Null, Cell::Null, Cell::Null]);
        return vec![row];
    }
    card.partitions
        .iter()
        .map(|p| {
            let mut row = head();
            row.extend([
                Cell::Text(p.partition.clone()),
                Cell::Int(p.spec_id),
                Cell::Text(p.verdict.as_str().into()),
                Cell::Text(p.reason.clone()),
                Cell::Text(p.action.clone()),
                big(p.files_before),
                big(p.files_after),
                big(p.small_files_before),
                big(p.small_files_after),
                Cell::Double(round_ratio(p.ratio_before)),
                Cell::Double(round_ratio(p.ratio_after)),
                Cell::Double(round_mb(p.bytes_consolidated as f64 / MIB)),
            ]);
            table_level(&mut row);
            row.extend([
                p.executor.clone().map_or(Cell::Null, Cell::Text),
                p.executor_reason.clone().map_or(Cell::Null, Cell::Text),
                p.strategy.clone().map_or(Cell::Null, Cell::Text),
                warnings(),
                big(p.rows_purged),
            ]);
            row.extend(deletes());
            row.push(p.commit.clone().map_or(Cell::Null, Cell::Text));
            row.extend([Cell::Text(p.sizes_before.clone()), Cell::Text(p.sizes_after.clone())]);
            row
        })
        .collect()
}

fn sql_type(id: LogicalTypeId) -> &'static str {
    match id {
        LogicalTypeId::Varchar => "VARCHAR",
        LogicalTypeId::Integer => "INTEGER",
        LogicalTypeId::Bigint => "BIGINT",
        LogicalTypeId::Double => "DOUBLE",
        LogicalTypeId::Boolean => "BOOLEAN",
        LogicalTypeId::Timestamp => "TIMESTAMP",
        _ => "VARCHAR",
    }
}

/// Appends `rows` to `table` (created with the scorecard's columns when missing). Values are
/// SQL literals ([`sql_literal`]), so the statement is the same on every DuckDB version.
pub(crate) fn append_history(host: &HostDb, table: &str, rows: &[Vec<Cell>]) -> Result<()> {
    let conn = host.connect()?;
    let columns: Vec<String> =
        COLUMNS.iter().map(|(name, ty)| format!("{} {}", quote_ident(name), sql_type(*ty))).collect();
    conn.execute(&format!("CREATE TABLE IF NOT EXISTS {table} ({})", columns.join(", ")))?;
    // A history table an earlier version created lacks the newer columns.
    for column in &columns {
        conn.execute(&format!("ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {column}"))?;
    }
    let names: Vec<String> = COLUMNS.iter().map(|(name, _)| quote_ident(name)).collect();
    for row in rows {
        let values: Vec<String> = row.iter().map(sql_literal).collect();
        conn.execute(&format!("INSERT INTO {table} ({}) VALUES ({})", names.join(", "), values.join(", ")))?;
    }
    Ok(())
}

/// A cell as a typed SQL literal.
fn sql_literal(cell: &Cell) -> String {
    match cell {
        Cell::Text(s) => quote_literal(s),
        Cell::BigInt(v) => format!("{v}::BIGINT"),
        Cell::Int(v) => format!("{v}::INTEGER"),
        Cell::Double(v) if v.is_finite() => format!("{v:?}::DOUBLE"),
        Cell::Double(v) => format!("'{v}'::DOUBLE"),
        Cell::Bool(v) => v.to_string(),
        Cell::Timestamp(micros) => match chrono::DateTime::from_timestamp_micros(*micros) {
            Some(t) => format!("'{}'::TIMESTAMP", t.naive_utc().format("%Y-%m-%d %H:%M:%S%.6f")),
            None => "NULL".into(),
        },
        Cell::Null => "NULL".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_table_names_are_quoted_per_part() {
        assert_eq!(qualified_name("lakehouse_runs").unwrap(), "\"lakehouse_runs\"");
        assert_eq!(qualified_name("ops.runs").unwrap(), "\"ops\".\"runs\"");
        assert_eq!(qualified_name("a\"b").unwrap(), "\"a\"\"b\"");
        for bad in ["", "a..b", "a.b.c.d", "x."] {
            assert!(qualified_name(bad).is_err(), "{bad}");
        }
    }
}
