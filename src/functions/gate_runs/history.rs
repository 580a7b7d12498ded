//! The run history of `lakehouse_gate` and `lakehouse_serve`: every run, failed ones included,
//! appended where the caller asked — `history_path`, a local directory that gets one new Parquet
//! file per run (written under a temporary name, then renamed, so a reader never sees half a
//! file and any number of processes can write beside each other: the weekly job and the
//! webhook server on one machine), and/or `history_table`, a table of the caller's DuckDB
//! database (one process holds a database file's lock: fine in a notebook or dbt, not for
//! processes running side by side).
//!
//! The rows are the scorecard's ([`super::scorecard_rows::COLUMNS`]) plus `error`: NULL for a
//! run that finished, the error for one that failed (its row has `status` `failed`, the table,
//! the execution id, the start, the duration and `dry_run`; the other columns are NULL).

use std::path::PathBuf;

use duckdb::core::LogicalTypeId;

use super::scorecard_rows::COLUMNS;
use crate::duck::{HostDb, quote_ident, quote_literal};
use crate::error::{Error, ErrorKind, Result};
use crate::functions::args::Args;
use crate::functions::row_function::Cell;
use crate::store::location::Location;

/// Where a run's rows go.
#[derive(Debug, Clone, Default)]
pub struct History {
    /// A DuckDB table of the host database, quoted.
    pub table: Option<String>,
    /// A local directory of Parquet files, one per run.
    pub path: Option<PathBuf>,
}

/// `history_table` and `history_path` from the named parameters.
pub fn history_options(args: &Args) -> Result<History> {
    let table = args.opt_string("history_table", false)?.map(|t| qualified_name(&t)).transpose()?;
    let path = args.opt_string("history_path", false)?.map(|p| history_dir(&p)).transpose()?;
    Ok(History { table, path })
}

/// `history_path`: a local directory (created when missing, at the first run).
fn history_dir(text: &str) -> Result<PathBuf> {
    match Location::parse(text.trim()) {
        Ok(Location::Local(path)) if !text.trim().is_empty() => Ok(path),
        _ => Err(Error::invalid(format!(
            "history_path must be a local directory (each run adds one Parquet file to it), got '{text}'"
        ))),
    }
}

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

/// The history's columns: the scorecard's, then `error`.
pub fn columns() -> Vec<(&'static str, LogicalTypeId)> {
    let mut columns = COLUMNS.to_vec();
    columns.push(("error", LogicalTypeId::Varchar));
    columns
}

/// A finished run's history rows: its scorecard rows with a NULL `error`.
pub fn finished(rows: &[Vec<Cell>]) -> Vec<Vec<Cell>> {
    rows.iter().map(|r| r.iter().cloned().chain([Cell::Null]).collect()).collect()
}

/// What is known of a run that failed.
pub struct Failure<'a> {
    /// The execution id (also in the alert and the error).
    pub execution_id: &'a str,
    /// The table as named.
    pub table: &'a str,
    /// Whether it was a dry run.
    pub dry_run: bool,
    /// When it started, ms since the epoch.
    pub started_ms: i64,
    /// How long it ran.
    pub duration_ms: i64,
    /// The error (made without secrets: errors never carry a webhook URL or a key).
    pub error: &'a str,
}

/// A failed run's one history row.
pub fn failed(failure: &Failure) -> Vec<Cell> {
    columns()
        .iter()
        .map(|(name, _)| match *name {
            "execution_id" => Cell::Text(failure.execution_id.to_string()),
            "table_name" => Cell::Text(failure.table.to_string()),
            "status" => Cell::Text("failed".into()),
            "dry_run" => Cell::Bool(failure.dry_run),
            "started_at" => Cell::Timestamp(failure.started_ms.saturating_mul(1000)),
            "duration_ms" => Cell::BigInt(failure.duration_ms),
            "error" => Cell::Text(failure.error.to_string()),
            _ => Cell::Null,
        })
        .collect()
}

/// Appends history `rows` (in [`columns`] order) to every sink of `history`; an error names
/// each sink that failed.
pub fn record(host: &HostDb, history: &History, execution_id: &str, rows: &[Vec<Cell>]) -> Result<()> {
    if history.table.is_none() && history.path.is_none() {
        return Ok(());
    }
    let values = values(rows);
    // Each sink is written even when the other fails: a run is lost from neither for the other.
    let table = history.table.as_ref().map(|table| append_table(host, table, &values));
    let file = history.path.as_ref().map(|dir| write_file(host, dir, execution_id, &values));
    match (table, file) {
        (Some(Err(t)), Some(Err(f))) => Err(Error::new(t.kind(), format!("{t}; and {f}"))),
        (Some(Err(e)), _) | (_, Some(Err(e))) => Err(e),
        _ => Ok(()),
    }
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

/// The rows as a `VALUES` list of typed literals (a NULL too has its column's type, so a
/// Parquet file of one failed run has the same schema as any other).
fn values(rows: &[Vec<Cell>]) -> String {
    let columns = columns();
    rows.iter()
        .map(|row| {
            let cells: Vec<String> = row
                .iter()
                .zip(&columns)
                .map(|(cell, (_, ty))| format!("CAST({} AS {})", sql_literal(cell), sql_type(*ty)))
                .collect();
            format!("({})", cells.join(", "))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn names() -> String {
    columns().iter().map(|(name, _)| quote_ident(name)).collect::<Vec<_>>().join(", ")
}

/// Appends to `table` (created with the history's columns when missing; a table an earlier
/// version created gets the newer columns).
fn append_table(host: &HostDb, table: &str, values: &str) -> Result<()> {
    let conn = host.connect()?;
    let columns: Vec<String> =
        columns().iter().map(|(name, ty)| format!("{} {}", quote_ident(name), sql_type(*ty))).collect();
    conn.execute(&format!("CREATE TABLE IF NOT EXISTS {table} ({})", columns.join(", ")))?;
    for column in &columns {
        conn.execute(&format!("ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {column}"))?;
    }
    conn.execute(&format!("INSERT INTO {table} ({}) VALUES {values}", names()))?;
    Ok(())
}

/// Writes one Parquet file into `dir`: `<UTC time>-<execution id>.parquet`, written as a hidden
/// temporary file first and renamed, so `read_parquet('<dir>/*.parquet')` sees whole files only.
fn write_file(host: &HostDb, dir: &std::path::Path, execution_id: &str, values: &str) -> Result<()> {
    let io = |what: &str, e: std::io::Error| {
        Error::new(ErrorKind::Io, format!("cannot {what} the history directory {}: {e}", dir.display()))
    };
    std::fs::create_dir_all(dir).map_err(|e| io("create", e))?;
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%S%.6fZ");
    let name = format!("{stamp}-{execution_id}.parquet");
    let temporary = dir.join(format!(".{name}.tmp"));
    let target = dir.join(&name);
    let conn = host.connect()?;
    let written = conn.execute(&format!(
        "COPY (SELECT * FROM (VALUES {values}) AS run({})) TO {} (FORMAT parquet)",
        names(),
        quote_literal(&temporary.to_string_lossy())
    ));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&temporary);
        return Err(e);
    }
    std::fs::rename(&temporary, &target).map_err(|e| {
        let _ = std::fs::remove_file(&temporary);
        io("add a file to", e)
    })
}

/// A cell as a SQL literal.
fn sql_literal(cell: &Cell) -> String {
    match cell {
        Cell::Text(s) => quote_literal(s),
        Cell::BigInt(v) => v.to_string(),
        Cell::Int(v) => v.to_string(),
        Cell::Double(v) if v.is_finite() => format!("{v:?}"),
        Cell::Double(v) => format!("'{v}'"),
        Cell::Bool(v) => v.to_string(),
        Cell::Timestamp(micros) => match chrono::DateTime::from_timestamp_micros(*micros) {
            Some(t) => format!("'{}'", t.naive_utc().format("%Y-%m-%d %H:%M:%S%.6f")),
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

    #[test]
    fn history_path_is_a_local_directory() {
        assert_eq!(history_dir("/var/lib/lakehouse/history").unwrap(), PathBuf::from("/var/lib/lakehouse/history"));
        for bad in ["", "  ", "s3://bucket/history"] {
            assert!(history_dir(bad).unwrap_err().to_string().contains("history_path must be a local directory"));
        }
    }

    #[test]
    fn a_failed_run_has_one_row_of_the_history_columns() {
        let row = failed(&Failure {
            execution_id: "id",
            table: "ns.t",
            dry_run: false,
            started_ms: 1_000,
            duration_ms: 5,
            error: "boom",
        });
        let columns = columns();
        assert_eq!(row.len(), columns.len());
        let at = |name: &str| &row[columns.iter().position(|(n, _)| *n == name).unwrap()];
        assert_eq!(at("status"), &Cell::Text("failed".into()));
        assert_eq!(at("error"), &Cell::Text("boom".into()));
        assert_eq!(at("started_at"), &Cell::Timestamp(1_000_000));
        assert_eq!(at("partition"), &Cell::Null);
    }
}
