//! A measured full scan of a set of data files through DuckDB: the time to read every column
//! of every row, with a row count and an order-independent checksum of the rows.
//!
//! The gate scans the compacted partitions' live files before and after compaction: the times
//! give the measured speedup, and equal counts and checksums prove the rewrite kept every row.
//! Files are read as the table's current schema, exactly as the compaction reads them (Iceberg:
//! by field id where files carry ids, by name otherwise; Delta: by name, without the partition
//! columns, which the files do not hold). Delete files that apply to the scanned Iceberg files, and
//! the deletion vectors of the scanned Delta files, are applied, as a reader of the table applies them: a merge-on-read partition is timed with the
//! cost of its deletes, and compared by the rows a reader sees.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::action::compact::deletion_vectors::DeletedPositions;
use crate::action::compact::delta_columns::DeltaColumns;
use crate::action::compact::iceberg_nested_defaults::NestedDefaults;
use crate::action::compact::select_sql;
use crate::duck::{quote_files, quote_ident};
use crate::error::{Error, ErrorKind, Result};
pub use crate::report::ScanResult;
use crate::store::duckdb_path;
use crate::table::Table;
use crate::table::delta::LiveFile;
use crate::table::iceberg::IcebergTable;

/// Scans `paths` (data file locations) `runs` times (at least 1); the best time counts (the first
/// run also warms the file cache, so before and after are compared warm).
pub fn scan(conn: &crate::duck::Connection, table: &Table, paths: &[String], runs: u32) -> Result<ScanResult> {
    let local: Vec<String> = paths.iter().map(|p| duckdb_path(p).to_string()).collect();
    if local.is_empty() {
        return Ok(ScanResult { files: 0, rows: 0, checksum: "0".into(), elapsed: Duration::ZERO });
    }
    // Every file is on the table's store before any is read.
    let root = table.root()?;
    root.check_reads(paths.iter().map(String::as_str))?;
    // Held while DuckDB reads the files.
    let access = crate::store::prepare_remote(conn, &root)?;
    if let Some(notice) = &access.notice {
        crate::progress_lines::line(|| notice.clone());
    }
    // Lives until the scan is done (its temporary file is read by the query).
    let deleted: Option<DeletedPositions>;
    let (columns, source) = match table {
        Table::Iceberg { located, table } => {
            match crate::action::compact::merge_on_read_select(conn, located, table, paths)? {
                Some((sql, vectors)) => {
                    deleted = vectors;
                    let schema = table.metadata.current_schema();
                    (schema.as_struct().fields().iter().map(|f| quote_ident(&f.name)).collect(), sql)
                }
                None => {
                    deleted = None;
                    iceberg_source(conn, table, &local)?
                }
            }
        }
        Table::Delta(table) => {
            let columns = DeltaColumns::of(table)?;
            let names = columns.names().into_iter().map(quote_ident).collect();
            // The table's live files among them have their deletion vectors applied.
            let by_path: HashMap<&std::path::Path, &LiveFile> =
                table.files.iter().map(|f| (f.local_path.as_path(), f)).collect();
            let live: Vec<&LiveFile> =
                local.iter().filter_map(|p| by_path.get(std::path::Path::new(p)).copied()).collect();
            deleted = DeletedPositions::of(&table.root, &live)?;
            (names, columns.select_sql(conn, &local, deleted.as_ref(), &columns.row_ids(&live), None)?)
        }
    };
    let sql = format!(
        "SELECT count(*)::BIGINT, coalesce(sum(hash({}))::VARCHAR, '0') FROM ({source}) AS scanned",
        columns.join(", ")
    );
    let scanned = timed(conn, &sql, local.len() as u64, runs);
    drop(deleted);
    scanned
}

/// The columns and the `SELECT` of `local` Iceberg data files.
fn iceberg_source(conn: &crate::duck::Nested, table: &IcebergTable, local: &[String]) -> Result<(Vec<String>, String)> {
    let schema = table.metadata.current_schema();
    let columns: Vec<String> = schema.as_struct().fields().iter().map(|f| quote_ident(&f.name)).collect();
    // Files with and without field ids are read apart (each the way compaction reads it).
    let list = quote_files(local);
    let mut with_ids: HashMap<String, bool> = HashMap::new();
    let probe = conn.query(&format!(
        "SELECT file_name::VARCHAR, count(field_id) > 0 FROM parquet_schema({list}) GROUP BY file_name"
    ))?;
    for row in &probe.rows {
        if let Some(name) = row[0].text() {
            with_ids.insert(name.to_string(), row[1].bool()?);
        }
    }
    let (by_id, by_name): (Vec<String>, Vec<String>) =
        local.iter().cloned().partition(|p| with_ids.get(p).copied().unwrap_or(false));
    let parts: Vec<String> = [(by_id, true), (by_name, false)]
        .into_iter()
        .filter(|(files, _)| !files.is_empty())
        .map(|(files, ids)| {
            let fills = if ids { NestedDefaults::probe(conn, schema, &files)? } else { NestedDefaults::default() };
            select_sql(schema, &files, ids, &fills)
        })
        .collect::<Result<_>>()?;
    Ok((columns, parts.join(" UNION ALL ")))
}

/// Runs the scan `sql` `runs` times (at least 1); the best time counts.
fn timed(conn: &crate::duck::Nested, sql: &str, files: u64, runs: u32) -> Result<ScanResult> {
    let mut best: Option<(Duration, u64, String)> = None;
    for _ in 0..runs.max(1) {
        let started = Instant::now();
        let result = conn.query(sql)?;
        let row = result.first("the scan")?;
        let (count, checksum) = (row[0].int()?, row[1].text().unwrap_or("0").to_string());
        let elapsed = started.elapsed();
        if let Some((_, c, s)) = &best
            && (*c != count as u64 || *s != checksum)
        {
            return Err(Error::new(ErrorKind::Io, "two scans of the same files disagree"));
        }
        if best.as_ref().is_none_or(|(t, _, _)| elapsed < *t) {
            best = Some((elapsed, count as u64, checksum));
        }
    }
    let (elapsed, rows, checksum) = best.unwrap_or_default();
    Ok(ScanResult { files, rows, checksum, elapsed })
}
