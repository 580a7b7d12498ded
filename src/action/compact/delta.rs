//! Compaction of a Delta Lake table: the shared planner picks the groups, DuckDB rewrites each
//! group into one file in its partition's directory, and one `OPTIMIZE` commit (delta-rs's
//! `CommitBuilder`) removes the inputs and adds the outputs, all with `dataChange: false`, as
//! Spark's and delta-rs's OPTIMIZE commit.
//!
//! Safety rules, as for Iceberg ([`crate::action::compact`]):
//! - the protocol is checked first: a reader or writer feature whose meaning a rewrite could
//!   break (column mapping, row tracking, Iceberg compatibility, clustering, type widening, v2
//!   checkpoints, in-commit timestamps, catalog-managed commits, anything unknown) is refused,
//!   naming it ([`check_protocol`]);
//! - files with deletion vectors are modelled as deleted rows ([`crate::table::delta`]): their
//!   partitions are skipped, so no deleted row comes back;
//! - every output holds exactly its inputs' rows (checked before the commit); files are written
//!   without the partition columns (their values live in the log), with `stats` (numRecords,
//!   nullCount, min/max where exact) so readers keep skipping files;
//! - the commit is put-if-absent on `_delta_log/<v>.json`; on a concurrent commit delta-rs's
//!   conflict checker decides as Delta does (an append passes; a removal of one of our inputs or
//!   a protocol/metadata change fails it) and a failed commit removes everything we wrote;
//! - post-commit: a checkpoint every `delta.checkpointInterval` commits and the expired-log
//!   cleanup per `delta.enableExpiredLogCleanup` / `delta.logRetentionDuration`, as any Delta
//!   writer does.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use deltalake_core::kernel::transaction::{CommitBuilder, CommitProperties};
use deltalake_core::kernel::{Action, Add};
use deltalake_core::protocol::DeltaOperation;
use serde_json::{Value, json};

use crate::action::compact::commit::sync_files;
use crate::action::compact::run::copy_in_order;
use crate::action::compact::run::{Committed, Rewrite};
use crate::action::compact::stats::DUCKDB_STRING_STATS_BYTES;
use crate::action::layout::{OrderedRows, RowOrder, resolve_names};
use crate::duck::{Nested, quote_ident, quote_literal};
use crate::error::{Error, ErrorKind, Result};
use crate::interrupt;
use crate::plan::compaction::{CompactionOptions, PartitionPlan};
use crate::plan::layout::Layout;
use crate::table::delta::commit::{CompactionView, UriPathLogStore};
use crate::table::delta::{DeltaLakeTable, LiveFile, delta_error};
use crate::table::{DataFile, FileContent};

/// Writer features a rewrite with `dataChange: false` keeps valid: the rows are the same rows.
const REWRITE_SAFE_FEATURES: &[&str] = &[
    "appendOnly",
    "invariants",
    "checkConstraints",
    "generatedColumns",
    "changeDataFeed",
    "identityColumns",
    "timestampNtz",
    "deletionVectors",
    "vacuumProtocolCheck",
];

/// The reader features a reader of ours (DuckDB's Parquet reader, by column name) handles.
const READABLE_FEATURES: &[&str] = &["timestampNtz", "deletionVectors", "vacuumProtocolCheck"];

/// Refuses a table whose protocol this rewrite could break, naming what.
pub fn check_protocol(table: &DeltaLakeTable) -> Result<()> {
    let refuse = |what: String| {
        Err(Error::new(
            ErrorKind::Unsupported,
            format!("Delta table '{}' {what}; compaction does not rewrite it", table.root.display()),
        ))
    };
    if table.keeps_iceberg_metadata() {
        return refuse(
            "keeps Iceberg metadata beside its log (UniForm: delta.universalFormat.enabledFormats or an icebergCompat \
             feature); a rewrite would leave that metadata behind the Delta log, and Iceberg readers would read the \
             replaced files until a VACUUM deletes them"
                .into(),
        );
    }
    // Column mapping passes here to be refused below with its mode.
    let readers: Vec<&str> = READABLE_FEATURES.iter().copied().chain(["columnMapping"]).collect();
    let writers: Vec<&str> = REWRITE_SAFE_FEATURES.iter().copied().chain(["columnMapping"]).collect();
    if let Some(what) = table.unknown_protocol(&readers, &writers) {
        return refuse(what);
    }
    let mapping = table.property("delta.columnMapping.mode").unwrap_or("none");
    if mapping != "none" {
        return refuse(format!(
            "uses column mapping (delta.columnMapping.mode = '{mapping}': files name columns by physical name)"
        ));
    }
    Ok(())
}

/// A Delta table's part in a compaction ([`crate::action::compact::run`]): the current
/// version's live files, rewritten by column name, committed as one OPTIMIZE commit.
pub(crate) struct DeltaRewrite<'a> {
    table: &'a DeltaLakeTable,
    files: Vec<DataFile>,
    /// For each model data file: its live file (deletion-vector entries have none).
    live: Vec<Option<usize>>,
    columns: DeltaColumns,
    target_size: i64,
    /// What the rewrite's order is (Delta tables have no sort order of their own: binpack
    /// unless `sort_order` is given).
    layout: Layout,
}

impl<'a> DeltaRewrite<'a> {
    /// Checks the protocol ([`check_protocol`]) and reads what the planner needs.
    pub(crate) fn new(table: &'a DeltaLakeTable, options: &CompactionOptions) -> Result<Self> {
        check_protocol(table)?;
        let files = table.model_files();
        let index: HashMap<&std::ffi::OsStr, usize> =
            table.files.iter().enumerate().map(|(i, f)| (f.local_path.as_os_str(), i)).collect();
        let live = files
            .iter()
            .map(|f| {
                (f.content == FileContent::Data).then(|| index.get(std::ffi::OsStr::new(&f.path)).copied()).flatten()
            })
            .collect();
        let mut columns = DeltaColumns::of(table);
        let layout = resolve_names(options.layout.resolve(&[])?, &columns.sortable())?;
        columns.order = RowOrder::of(&layout, |n| {
            columns.data.iter().find(|(d, ..)| d == n).and_then(|(_, t, _)| t.clone()).unwrap_or_default()
        });
        Ok(Self {
            table,
            files,
            live,
            columns,
            target_size: (options.target_file_size_mb * crate::profile::MIB) as i64,
            layout,
        })
    }

    /// The live files of the planned files `group`.
    fn inputs(&self, group: &[usize]) -> Result<Vec<&LiveFile>> {
        group
            .iter()
            .map(|&i| {
                self.live[i].map(|l| &self.table.files[l]).ok_or_else(|| {
                    Error::new(ErrorKind::CorruptMetadata, "a planned file is not a live data file (this is a bug)")
                })
            })
            .collect()
    }
}

impl Rewrite for DeltaRewrite<'_> {
    type Written = Written;
    const DELETES: &'static str = "deletion vectors";

    fn files(&self) -> &[DataFile] {
        &self.files
    }

    fn layout(&self) -> Layout {
        self.layout.clone()
    }

    fn copy_sql(&self, conn: &Nested, group: &[usize], target: &str) -> Result<String> {
        self.columns.copy_sql(conn, &self.inputs(group)?, target)
    }

    fn rewrite(&self, conn: &Nested, _plan: &PartitionPlan, group: &[usize], outputs: usize) -> Result<Vec<Written>> {
        rewrite_group(conn, self.table, &self.columns, &self.inputs(group)?, outputs)
    }

    fn local_path(written: &Written) -> &Path {
        &written.local_path
    }

    fn output(written: &Written) -> Option<String> {
        Some(written.local_path.to_string_lossy().into_owned())
    }

    fn commit(&self, written: &[Written]) -> Result<Committed> {
        sync_files(written.iter().filter_map(|w| w.local_path.to_str()))?;
        // On object storage the next _delta_log entry is created by a conditional put; a store
        // that ignored the condition could overwrite a concurrent writer's commit.
        let log_dir = self.table.log_dir().to_string_lossy().into_owned();
        if crate::store::is_remote(&log_dir) {
            crate::runtime::block_on(crate::store::require_conditional_writes(&log_dir))??;
        }
        interrupt::pause_for_tests();
        interrupt::check("nothing was committed")?;
        let (version, warning) = commit(self.table, self.target_size, written)?;
        let location = self.table.log_dir().join(format!("{version:020}.json")).to_string_lossy().into_owned();
        Ok(Committed { id: version, location, warning, deletes_removed: HashMap::new() })
    }
}

/// A file the rewrite wrote, and what it replaces.
pub(crate) struct Written {
    local_path: PathBuf,
    add: Add,
    replaces: Vec<deltalake_core::kernel::Remove>,
}

/// The columns a rewrite reads and writes: the table's top-level fields without the partition
/// columns (their values live in the log), in schema order, each as its Delta type.
pub(crate) struct DeltaColumns {
    /// (name, DuckDB type, Delta type) of each data column.
    data: Vec<(String, Option<String>, Value)>,
    /// Columns that get min/max statistics (`delta.dataSkippingNumIndexedCols` /
    /// `delta.dataSkippingStatsColumns`).
    indexed: Vec<String>,
    compression: &'static str,
    /// The order the rewrite writes rows in ([`crate::action::layout`]).
    order: RowOrder,
}

impl DeltaColumns {
    pub(crate) fn of(table: &DeltaLakeTable) -> Self {
        let partition: Vec<String> = table.partition_columns();
        let data: Vec<(String, Option<String>, Value)> = table
            .fields()
            .into_iter()
            .filter_map(|f| {
                let name = f.get("name")?.as_str()?.to_string();
                let ty = f.get("type").cloned().unwrap_or(Value::Null);
                (!partition.contains(&name)).then(|| (name, duckdb_type(&ty), ty))
            })
            .collect();
        let indexed = match table.property("delta.dataSkippingStatsColumns") {
            Some(list) => list.split(',').map(|c| c.trim().trim_matches('`').to_string()).collect(),
            None => {
                let n = table
                    .property("delta.dataSkippingNumIndexedCols")
                    .and_then(|v| v.parse::<i64>().ok())
                    .unwrap_or(32);
                let take = if n < 0 { usize::MAX } else { n as usize };
                data.iter().take(take).map(|(name, ..)| name.clone()).collect()
            }
        };
        let compression = match table.property("delta.parquet.compression.codec") {
            Some("snappy") => "snappy",
            Some("gzip") => "gzip",
            Some("uncompressed") => "uncompressed",
            _ => "zstd",
        };
        Self { data, indexed, compression, order: RowOrder::Unordered }
    }

    /// The data columns' names, in order.
    pub(crate) fn names(&self) -> Vec<&str> {
        self.data.iter().map(|(n, ..)| n.as_str()).collect()
    }

    /// `SELECT` of every data column of `files` by name, as its Delta type: primitive columns
    /// cast (a Spark INT96 timestamp becomes the instant it was written as), a column no file
    /// has comes out NULL of its type.
    pub(crate) fn select_sql(&self, conn: &Nested, files: &[String]) -> Result<String> {
        let list = files.iter().map(|f| quote_literal(f)).collect::<Vec<_>>().join(", ");
        let source = format!("read_parquet([{list}], union_by_name = true)");
        let present: std::collections::HashSet<String> = conn
            .query(&format!("SELECT column_name::VARCHAR FROM (DESCRIBE SELECT * FROM {source})"))?
            .rows
            .iter()
            .filter_map(|r| r[0].text().map(str::to_string))
            .collect();
        let mut select = Vec::new();
        for (name, ty, _) in &self.data {
            let id = quote_ident(name);
            select.push(match (present.contains(name), ty) {
                (true, Some(ty)) if !ty.contains('(') || ty.starts_with("DECIMAL") => format!("CAST({id} AS {ty}) AS {id}"),
                (true, _) => id,
                (false, Some(ty)) => format!("CAST(NULL AS {ty}) AS {id}"),
                (false, None) => {
                    return Err(Error::new(
                        ErrorKind::Unsupported,
                        format!("column '{name}' is in none of the files and its type has no DuckDB form; nothing was committed"),
                    ));
                }
            });
        }
        Ok(format!("SELECT {} FROM {source}", select.join(", ")))
    }

    /// The data columns a rewrite can sort by: primitive ones.
    fn sortable(&self) -> Vec<String> {
        self.data
            .iter()
            .filter(|(_, ty, _)| {
                ty.as_deref().is_some_and(|t| !t.starts_with("STRUCT") && !t.starts_with("MAP") && !t.ends_with(']'))
            })
            .map(|(name, ..)| name.clone())
            .collect()
    }

    /// The COPY of `inputs` into `target` ([`DeltaColumns::select_sql`]), in the layout's order.
    fn copy_sql(&self, conn: &Nested, inputs: &[&LiveFile], target: &str) -> Result<String> {
        Ok(self.copy_to(&self.ordered_select(conn, inputs)?.sql(), target))
    }

    /// [`DeltaColumns::select_sql`] of `inputs`, in the layout's order.
    fn ordered_select(&self, conn: &Nested, inputs: &[&LiveFile]) -> Result<OrderedRows> {
        let files: Vec<String> = inputs.iter().map(|f| f.local_path.to_string_lossy().into_owned()).collect();
        self.order.rows(conn, self.select_sql(conn, &files)?)
    }

    /// The COPY of `select` into `target`.
    fn copy_to(&self, select: &str, target: &str) -> String {
        format!(
            "COPY ({select}) TO {} (FORMAT parquet, COMPRESSION {}, RETURN_STATS)",
            quote_literal(target),
            self.compression
        )
    }
}

/// DuckDB's type for a Delta type (struct children by name).
fn duckdb_type(ty: &Value) -> Option<String> {
    if let Some(object) = ty.as_object() {
        return match object.get("type")?.as_str()? {
            "struct" => {
                let fields: Option<Vec<String>> = object
                    .get("fields")?
                    .as_array()?
                    .iter()
                    .map(|f| {
                        Some(format!("{} {}", quote_ident(f.get("name")?.as_str()?), duckdb_type(f.get("type")?)?))
                    })
                    .collect();
                let fields = fields.filter(|f| !f.is_empty())?;
                Some(format!("STRUCT({})", fields.join(", ")))
            }
            "array" => Some(format!("{}[]", duckdb_type(object.get("elementType")?)?)),
            "map" => Some(format!(
                "MAP({}, {})",
                duckdb_type(object.get("keyType")?)?,
                duckdb_type(object.get("valueType")?)?
            )),
            _ => None,
        };
    }
    let name = ty.as_str()?;
    Some(match name {
        "string" => "VARCHAR".into(),
        "long" => "BIGINT".into(),
        "integer" => "INTEGER".into(),
        "short" => "SMALLINT".into(),
        "byte" => "TINYINT".into(),
        "float" => "FLOAT".into(),
        "double" => "DOUBLE".into(),
        "boolean" => "BOOLEAN".into(),
        "binary" => "BLOB".into(),
        "date" => "DATE".into(),
        "timestamp" => "TIMESTAMPTZ".into(),
        "timestamp_ntz" => "TIMESTAMP".into(),
        d if d.starts_with("decimal(") => d.to_uppercase(),
        _ => return None,
    })
}

/// Rewrites one group into `outputs` new files (in layout order, [`copy_in_order`]) in the
/// partition directory of its first input; the first written carries the removes.
fn rewrite_group(
    conn: &Nested,
    table: &DeltaLakeTable,
    columns: &DeltaColumns,
    inputs: &[&LiveFile],
    outputs: usize,
) -> Result<Vec<Written>> {
    if inputs.iter().any(|f| f.partition_values != inputs[0].partition_values) {
        return Err(Error::new(
            ErrorKind::CorruptMetadata,
            "a rewrite group mixes partitions; nothing was committed (this is a bug, please report it)",
        ));
    }
    let first_dir = Path::new(&inputs[0].path).parent().map(Path::to_path_buf).unwrap_or_default();
    // Relative inside the table (an absolute path names a shallow clone's source: write under
    // the root instead).
    let relative_dir =
        if first_dir.is_absolute() || inputs[0].path.contains("://") { PathBuf::new() } else { first_dir };
    let relatives: Vec<PathBuf> = (0..outputs.max(1))
        .map(|_| relative_dir.join(format!("part-00000-{}-c000.{}.parquet", uuid::Uuid::new_v4(), columns.compression)))
        .collect();
    let local_paths: Vec<PathBuf> = relatives.iter().map(|r| table.root.join(r)).collect();
    if !crate::store::is_remote(&local_paths[0].to_string_lossy())
        && let Some(parent) = local_paths[0].parent()
    {
        std::fs::create_dir_all(parent)?;
    }
    let targets: Vec<String> = local_paths.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    let select = columns.ordered_select(conn, inputs)?;
    let done = (|| {
        let copied = copy_in_order(conn, &select, &targets, &|select, target| columns.copy_to(select, target))?;
        let rows: u64 = copied.iter().map(|(rows, _)| rows).sum();
        let expected: Option<u64> = inputs.iter().map(|f| f.num_records).sum();
        if let Some(expected) = expected
            && rows != expected
        {
            return Err(Error::new(
                ErrorKind::CorruptMetadata,
                format!(
                    "rewrite of {} files produced {rows} rows, their stats say {expected}; nothing was committed",
                    inputs.len()
                ),
            ));
        }
        let mut adds = Vec::new();
        let mut null_counts: HashMap<String, Option<u64>> = HashMap::new();
        for ((relative, local_path), (rows, bytes)) in relatives.iter().zip(&local_paths).zip(copied) {
            let stats = file_stats(conn, local_path, columns, rows)?;
            for (name, ..) in &columns.data {
                let n = stats["nullCount"].get(name).and_then(Value::as_u64);
                let total = null_counts.entry(name.clone()).or_insert(Some(0));
                *total = total.zip(n).map(|(a, b)| a + b);
            }
            adds.push((
                rows,
                Add {
                    path: relative.to_string_lossy().into_owned(),
                    partition_values: inputs[0].partition_values.clone(),
                    size: bytes as i64,
                    modification_time: chrono::Utc::now().timestamp_millis(),
                    data_change: false,
                    stats: Some(stats.to_string()),
                    tags: None,
                    deletion_vector: None,
                    base_row_id: None,
                    default_row_commit_version: None,
                    clustering_provider: None,
                },
            ));
        }
        check_null_counts(inputs, &null_counts, columns)?;
        Ok(adds)
    })();
    match done {
        Ok(adds) => {
            // A file that got no row (fewer rows than files) is not added, unless every one is
            // empty: then the first carries the removes, as a single-file rewrite of empty inputs
            // always did.
            let any_rows = adds.iter().any(|(rows, _)| *rows > 0);
            let mut out: Vec<Written> = Vec::new();
            let mut dropped: Vec<String> = Vec::new();
            for (i, (local_path, (rows, add))) in local_paths.into_iter().zip(adds).enumerate() {
                if rows > 0 || (!any_rows && i == 0) {
                    out.push(Written { local_path, add, replaces: Vec::new() });
                } else {
                    dropped.push(local_path.to_string_lossy().into_owned());
                }
            }
            crate::store::remove_quietly(dropped.iter().map(String::as_str));
            out[0].replaces = inputs.iter().map(|f| f.remove.clone()).collect();
            Ok(out)
        }
        Err(e) => {
            crate::store::remove_quietly(targets.iter().map(String::as_str));
            Err(e)
        }
    }
}

/// Every data column whose inputs all carry a null count must keep it (a column read as NULL,
/// e.g. by a wrong name, would not). Inputs' counts come from their own stats.
fn check_null_counts(
    inputs: &[&LiveFile],
    written_counts: &HashMap<String, Option<u64>>,
    columns: &DeltaColumns,
) -> Result<()> {
    for (name, ..) in &columns.data {
        let expected: Option<u64> = inputs.iter().map(|f| f.null_counts.get(name).copied()).sum();
        let written = written_counts.get(name).copied().flatten();
        if let (Some(expected), Some(written)) = (expected, written)
            && expected != written
        {
            return Err(Error::new(
                ErrorKind::CorruptMetadata,
                format!(
                    "rewrite check failed: column '{name}' has {written} nulls, its inputs {expected}; nothing was committed"
                ),
            ));
        }
    }
    Ok(())
}

/// The `stats` of a written file, from its footer: `numRecords`, `nullCount` of every
/// top-level primitive column, and `minValues`/`maxValues` where DuckDB's statistics are exact
/// and Delta's JSON form is unambiguous (integers, floats without NaN, dates, strings DuckDB did
/// not truncate, timestamps widened to whole milliseconds, as Delta's stats keep milliseconds).
fn file_stats(conn: &Nested, path: &Path, columns: &DeltaColumns, rows: u64) -> Result<Value> {
    let result = conn.query(&format!(
        "SELECT path_in_schema::VARCHAR, stats_min_value::VARCHAR, stats_max_value::VARCHAR, \
         stats_null_count::BIGINT FROM parquet_metadata({})",
        quote_literal(&path.to_string_lossy())
    ))?;
    let types: HashMap<&str, &Value> = columns.data.iter().map(|(n, _, t)| (n.as_str(), t)).collect();
    let mut nulls: HashMap<String, Option<u64>> = HashMap::new();
    let mut mins: HashMap<String, Vec<Option<String>>> = HashMap::new();
    let mut maxs: HashMap<String, Vec<Option<String>>> = HashMap::new();
    for row in &result.rows {
        let Some(column) = row[0].text() else { continue };
        if !types.get(column).is_some_and(|t| t.is_string()) {
            continue; // nested: no statistics
        }
        let n = row[3].opt_int()?;
        let slot = nulls.entry(column.to_string()).or_insert(Some(0));
        *slot = match (*slot, n) {
            (Some(total), Some(n)) => Some(total + n.max(0) as u64),
            _ => None,
        };
        mins.entry(column.to_string()).or_default().push(row[1].text().map(str::to_string));
        maxs.entry(column.to_string()).or_default().push(row[2].text().map(str::to_string));
    }
    let mut null_count = serde_json::Map::new();
    let (mut min_values, mut max_values) = (serde_json::Map::new(), serde_json::Map::new());
    for (name, count) in &nulls {
        let Some(count) = count else { continue };
        null_count.insert(name.clone(), json!(count));
        if !columns.indexed.contains(name) || *count == rows {
            continue;
        }
        let ty = types[name.as_str()].as_str().unwrap_or_default();
        let parse = |texts: &Vec<Option<String>>, upper: bool| -> Option<Vec<(Value, f64)>> {
            texts.iter().map(|t| t.as_deref().and_then(|t| stat_value(ty, t, upper))).collect()
        };
        if let (Some(lo), Some(hi)) = (parse(&mins[name], false), parse(&maxs[name], true))
            && let (Some(lo), Some(hi)) = (
                lo.into_iter().min_by(|a, b| a.1.total_cmp(&b.1).then_with(|| cmp_json(&a.0, &b.0))),
                hi.into_iter().max_by(|a, b| a.1.total_cmp(&b.1).then_with(|| cmp_json(&a.0, &b.0))),
            )
        {
            min_values.insert(name.clone(), lo.0);
            max_values.insert(name.clone(), hi.0);
        }
    }
    Ok(json!({"numRecords": rows, "minValues": min_values, "maxValues": max_values, "nullCount": null_count}))
}

/// Orders strings (the only non-numeric bounds) by their text; numbers tie on the sort key.
fn cmp_json(a: &Value, b: &Value) -> std::cmp::Ordering {
    a.as_str().unwrap_or_default().cmp(b.as_str().unwrap_or_default())
}

/// A statistic as Delta's stats JSON writes it, with a numeric sort key (0 for strings, which
/// order by text); `None` when not exact enough to be a bound.
fn stat_value(ty: &str, text: &str, upper: bool) -> Option<(Value, f64)> {
    match ty {
        "long" | "integer" | "short" | "byte" => text.parse::<i64>().ok().map(|v| (json!(v), v as f64)),
        "float" | "double" => {
            let v: f64 = text.trim().parse().ok()?;
            if v.is_nan() || v.is_infinite() {
                return None;
            }
            // -0.0 and 0.0 compare equal; bound both.
            let v = if v == 0.0 { if upper { 0.0 } else { -0.0 } } else { v };
            Some((json!(v), v))
        }
        "date" => {
            let day = chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d").ok()?;
            Some((json!(text), day.and_hms_opt(0, 0, 0)?.and_utc().timestamp() as f64))
        }
        "string" if upper && text.len() >= DUCKDB_STRING_STATS_BYTES => None,
        "string" => Some((json!(text), 0.0)),
        "timestamp" | "timestamp_ntz" => {
            let naive = match ty {
                "timestamp" => text.strip_suffix("+00")?,
                _ => text,
            };
            let t = chrono::NaiveDateTime::parse_from_str(naive, "%Y-%m-%d %H:%M:%S%.f").ok()?.and_utc();
            let micros = t.timestamp_micros();
            // Delta keeps milliseconds: the minimum rounds down, the maximum up.
            let millis = if upper {
                micros.div_euclid(1000) + i64::from(micros.rem_euclid(1000) != 0)
            } else {
                micros.div_euclid(1000)
            };
            let t = chrono::DateTime::from_timestamp_millis(millis)?;
            let text = match ty {
                "timestamp" => t.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string(),
                _ => t.naive_utc().format("%Y-%m-%dT%H:%M:%S%.3f").to_string(),
            };
            Some((json!(text), millis as f64))
        }
        _ => None,
    }
}

/// The `commitInfo` key that marks a commit as this rewrite's (a fresh id per commit), so that a
/// commit whose answer was lost can be recognized in the log.
const COMMIT_ID_KEY: &str = "lakehouse.commitId";

/// Commits the rewrite: one OPTIMIZE commit of removes and adds (dataChange false). Returns the
/// version, and a warning when a step after the commit point failed (delta-rs's post-commit
/// checkpoint or log cleanup): the version is committed all the same, and an error here would
/// make the caller delete the files it adds.
///
/// The commit point is the creation of `_delta_log/<v>.json`. When delta-rs reports a failure
/// other than a clean conflict — or a conflict that could be with itself: an object store's
/// retry of a conditional write that had landed answers "already exists" — the log after the
/// version read is searched for this commit's id ([`COMMIT_ID_KEY`]): found, it is committed;
/// not found on a local disk, it is not; not found on object storage after a transport error,
/// the outcome is unknown and every file is kept.
fn commit(table: &DeltaLakeTable, target_size: i64, written: &[Written]) -> Result<(i64, Option<String>)> {
    let mut actions: Vec<Action> = Vec::new();
    let mut removed = 0usize;
    for w in written {
        for remove in &w.replaces {
            let mut remove = remove.clone();
            remove.data_change = false;
            remove.deletion_timestamp = Some(chrono::Utc::now().timestamp_millis());
            actions.push(Action::Remove(remove));
            removed += 1;
        }
        actions.push(Action::Add(w.add.clone()));
    }
    let metrics = json!({
        "numFilesAdded": written.len(),
        "numFilesRemoved": removed,
        "numBytesAdded": written.iter().map(|w| w.add.size).sum::<i64>(),
        "numBytesRemoved": written.iter().flat_map(|w| &w.replaces).map(|r| r.size.unwrap_or(0)).sum::<i64>(),
    });
    let commit_id = uuid::Uuid::new_v4().to_string();
    let properties = CommitProperties::default()
        .with_metadata([
            ("operationMetrics".to_string(), metrics),
            ("readVersion".to_string(), json!(table.version)),
            ("isolationLevel".to_string(), json!("SnapshotIsolation")),
            ("isBlindAppend".to_string(), json!(false)),
            ("clientVersion".to_string(), json!(engine())),
            (COMMIT_ID_KEY.to_string(), json!(commit_id)),
        ])
        // As a Delta writer: a checkpoint every delta.checkpointInterval commits, expired logs
        // cleaned per the table's delta.enableExpiredLogCleanup and logRetentionDuration.
        .with_create_checkpoint(true)
        .with_cleanup_expired_logs(None);
    let state = table.table.snapshot().map_err(|e| delta_error(&table.root, e))?;
    // delta-rs's protocol check sees the table without the features a rewrite keeps by
    // construction, and its commit file gets URI-encoded paths (see table::delta::commit).
    let view = CompactionView::new(state)
        .map_err(|e| Error::invalid(format!("Delta table '{}': unreadable protocol: {e}", table.root.display())))?;
    let log_store = UriPathLogStore::wrap(table.table.log_store());
    let stage = crate::runtime::block_on(async {
        let prepared = CommitBuilder::from(properties)
            .with_actions(actions)
            .build(Some(&view), log_store, DeltaOperation::Optimize { predicate: None, target_size })
            .into_prepared_commit_future()
            .await;
        let prepared = match prepared {
            Ok(prepared) => prepared,
            Err(e) => return CommitStage::NotCommitted(e),
        };
        let post_commit = match prepared.await {
            Ok(post_commit) => post_commit,
            Err(e) => return CommitStage::Unconfirmed(e),
        };
        let version = post_commit.version;
        match post_commit.await {
            Ok(finalized) => CommitStage::Committed(finalized.version(), None),
            Err(e) => CommitStage::Committed(version, Some(e)),
        }
    })?;
    match stage {
        CommitStage::Committed(version, post_commit_error) => Ok((
            version as i64,
            post_commit_error.map(|e| {
                format!(
                    "committed version {version}, but the post-commit checkpoint or log cleanup failed ({e}); the \
                     table is consistent and a later commit writes the checkpoint"
                )
            }),
        )),
        CommitStage::NotCommitted(e) => Err(commit_error(&table.root, e)),
        CommitStage::Unconfirmed(e) => {
            let unknown = |why: String| {
                Error::new(
                    ErrorKind::CommitUnknown,
                    format!(
                        "Delta table '{}': the commit was not confirmed ({e}) and {why}; the rewritten files were \
                         left in place (VACUUM removes them once nothing references them); run again to compact",
                        table.root.display()
                    ),
                )
            };
            match crate::table::delta::commit::find_commit(&table.table, table.version, COMMIT_ID_KEY, &commit_id) {
                Ok(Some(version)) => Ok((version, None)),
                Ok(None) if is_conflict(&e) || !crate::store::is_remote(&table.root.to_string_lossy()) => {
                    Err(commit_error(&table.root, e))
                }
                Ok(None) => Err(unknown("the log does not show it yet".into())),
                Err(search) => Err(unknown(format!("the log could not be searched for it: {}", search.message()))),
            }
        }
    }
}

/// How far a Delta commit got ([`commit`]).
enum CommitStage {
    /// Failed before anything was written to the log.
    NotCommitted(deltalake_core::DeltaTableError),
    /// The write of the log entry failed or was refused: committed or not, the log tells.
    Unconfirmed(deltalake_core::DeltaTableError),
    /// The log entry exists (this version); the post-commit steps failed when the error is set.
    Committed(u64, Option<deltalake_core::DeltaTableError>),
}

/// Who wrote the commit (`clientVersion`; delta-rs fills `engineInfo` with its own version).
fn engine() -> String {
    format!("lakehouse/{} (DuckDB rewrite, delta-rs commit)", env!("CARGO_PKG_VERSION"))
}

/// Whether delta-rs gave up because of another writer (a conflict, or the version taken).
fn is_conflict(e: &deltalake_core::DeltaTableError) -> bool {
    use deltalake_core::kernel::transaction::TransactionError as T;
    match e {
        deltalake_core::DeltaTableError::Transaction { source } => {
            matches!(source, T::CommitConflict(_) | T::VersionAlreadyExists(_) | T::MaxCommitAttempts(_))
        }
        deltalake_core::DeltaTableError::VersionAlreadyExists(_) => true,
        _ => false,
    }
}

/// A failed commit as ours: a conflict with another writer is [`ErrorKind::CommitConflict`].
fn commit_error(root: &Path, e: deltalake_core::DeltaTableError) -> Error {
    let text = e.to_string();
    if is_conflict(&e) {
        return Error::conflict(format!(
            "another writer changed Delta table '{}' in a way this rewrite cannot be committed on ({text}); \
             nothing was committed",
            root.display()
        ));
    }
    delta_error(root, e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statistics_are_delta_json_and_never_too_narrow() {
        assert_eq!(stat_value("long", "-42", false).map(|v| v.0), Some(json!(-42)));
        assert_eq!(stat_value("double", "nan", true), None);
        assert_eq!(stat_value("date", "2026-10-01", false).map(|v| v.0), Some(json!("2026-10-01")));
        // Microseconds widen to whole milliseconds: down for the minimum, up for the maximum.
        let min = stat_value("timestamp", "2026-10-01 05:00:00.123456+00", false).unwrap().0;
        let max = stat_value("timestamp", "2026-10-01 05:00:00.123456+00", true).unwrap().0;
        assert_eq!((min, max), (json!("2026-10-01T05:00:00.123Z"), json!("2026-10-01T05:00:00.124Z")));
        let exact = stat_value("timestamp_ntz", "2026-10-01 05:00:00.5", true).unwrap().0;
        assert_eq!(exact, json!("2026-10-01T05:00:00.500"));
        assert_eq!(stat_value("timestamp", "2026-10-01 05:00:00+02", true), None);
        assert_eq!(stat_value("string", &"x".repeat(300), true), None);
        assert_eq!(stat_value("binary", "ab", true), None);
        assert_eq!(duckdb_type(&json!("decimal(10,2)")), Some("DECIMAL(10,2)".into()));
        assert_eq!(duckdb_type(&json!({"type": "struct", "fields": []})), None);
    }
}
