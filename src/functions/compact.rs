//! `lakehouse_compact(table, small_file_threshold_mb := 64, fragmentation_ratio_threshold := 0.35,
//! target_file_size_mb := 128, min_input_files := 2, partitions := NULL, apply_deletes := true,
//! executor := 'local', spark_remote := NULL, spark_catalog := NULL, local_max_partition_mb := 10240,
//! partial_progress := false, max_commits := 10, dry_run := false, …)`: bin-pack compaction of
//! degraded partitions (merge-on-read ones with their delete files applied), here or on Spark
//! ([`crate::action::executor`]), one row per partition considered; its `commit` column says what
//! the partition's commit did ([`crate::action::compact::progress`]).

use duckdb::core::{LogicalTypeHandle, LogicalTypeId};

use super::args::{Args, TABLE_PARAMETERS, THRESHOLD_PARAMETERS, named};
use super::{Cell, RowFunction};
use crate::action::executor::{
    DEFAULT_LOCAL_MAX_PARTITION_MB, ExecutorKind, ExecutorOptions, Opened, SparkTarget, compact_with_executor,
};
use crate::duck::HostDb;
use crate::error::{Error, Result};
use crate::plan::compaction::{CompactionOptions, DEFAULT_MAX_COMMITS, Verdict};
use crate::plan::format_options::FormatOnly;
use crate::plan::layout::{LayoutOptions, recent_window};
use crate::spark::Remote;
use crate::table::LocateOptions;

/// Parsed arguments.
pub struct CompactInput {
    table: String,
    locate: LocateOptions,
    options: CompactionOptions,
    executor: ExecutorOptions,
    dry_run: bool,
    /// Options of one format only: refused on a table of the other.
    format_only: FormatOnly,
}

/// The compaction table function.
pub struct Compact;

/// The compaction's named parameters besides the thresholds, `dry_run` and the table ones.
pub const COMPACTION_PARAMETERS: [&str; 12] = [
    "target_file_size_mb",
    "min_input_files",
    "partitions",
    "apply_deletes",
    "strategy",
    "sort_order",
    "skip_recent_partitions",
    "delete_ratio_threshold",
    "delete_file_threshold",
    "stitch",
    "partial_progress",
    "max_commits",
];

/// Who rewrites ([`crate::action::executor`]).
pub const EXECUTOR_PARAMETERS: [&str; 4] = ["executor", "spark_remote", "spark_catalog", "local_max_partition_mb"];

/// Reads [`EXECUTOR_PARAMETERS`], validated. `spark_remote` defaults to `SPARK_REMOTE` (as in
/// Spark's own clients); it may hold credentials, so it is never shown.
pub fn executor_options(args: &Args) -> Result<ExecutorOptions> {
    let kind = match args.opt_string("executor", false)? {
        Some(text) => ExecutorKind::parse(&text)?,
        None => ExecutorKind::Local,
    };
    let local_max_partition_mb = args.f64("local_max_partition_mb", DEFAULT_LOCAL_MAX_PARTITION_MB)?;
    if !(local_max_partition_mb.is_finite() && local_max_partition_mb > 0.0) {
        return Err(Error::invalid(format!(
            "local_max_partition_mb must be a positive number of MiB, got {local_max_partition_mb}"
        )));
    }
    let remote = args
        .opt_string("spark_remote", true)?
        .or_else(|| std::env::var("SPARK_REMOTE").ok().filter(|v| !v.trim().is_empty()));
    let catalog = args.opt_string("spark_catalog", false)?;
    if catalog.as_deref().is_some_and(|c| c.trim().is_empty()) {
        return Err(Error::invalid("spark_catalog must not be empty"));
    }
    let spark = match (kind, remote) {
        (ExecutorKind::Local, _) => None,
        (_, None) => {
            return Err(Error::invalid(
                "executor := 'spark' or 'auto' needs spark_remote (or the SPARK_REMOTE variable), e.g. 'sc://localhost:15002'",
            ));
        }
        (_, Some(remote)) => Some(SparkTarget { remote: Remote::parse(&remote)?, catalog }),
    };
    Ok(ExecutorOptions { kind, spark, local_max_partition_mb })
}

/// Reads the thresholds and [`COMPACTION_PARAMETERS`], validated; `partial_progress` defaults
/// to `partial_by_default` (on for the gate, off for `lakehouse_compact`).
pub fn compaction_options(args: &Args, partial_by_default: bool) -> Result<CompactionOptions> {
    let options = CompactionOptions {
        thresholds: args.thresholds()?,
        target_file_size_mb: args.f64("target_file_size_mb", 128.0)?,
        min_input_files: args.i64_in("min_input_files", 2, 2, i64::from(u32::MAX))? as u64,
        partitions: args.opt_string_list("partitions")?,
        apply_deletes: args.bool("apply_deletes", true)?,
        excluded: Vec::new(),
        layout: LayoutOptions::new(
            args.opt_string("strategy", false)?.as_deref(),
            args.opt_string("sort_order", false)?.as_deref(),
        )?,
        recent_window: recent_window(args.opt_string("skip_recent_partitions", false)?.as_deref())?,
        recent: Vec::new(),
        delete_ratio_threshold: args.opt_f64("delete_ratio_threshold")?,
        delete_file_threshold: args.opt_i64_in("delete_file_threshold", 1, i64::MAX)?.map(|n| n as u64),
        stitch: args.bool("stitch", true)?,
        partial_progress: args.bool("partial_progress", partial_by_default)?,
        max_commits: args.i64_in("max_commits", DEFAULT_MAX_COMMITS as i64, 1, 1_000_000)? as u64,
        only: None,
    };
    options.validate()?;
    Ok(options)
}

impl RowFunction for Compact {
    const NAME: &'static str = "lakehouse_compact";
    const LONG: bool = true;
    type Input = CompactInput;

    fn named_parameters() -> Vec<(String, LogicalTypeHandle)> {
        let mut names = THRESHOLD_PARAMETERS.to_vec();
        names.extend(COMPACTION_PARAMETERS);
        names.extend(EXECUTOR_PARAMETERS);
        names.push("dry_run");
        names.extend(TABLE_PARAMETERS);
        named(&names)
    }

    fn columns() -> Vec<(&'static str, LogicalTypeId)> {
        use LogicalTypeId::*;
        vec![
            ("partition", Varchar),
            ("spec_id", Integer),
            ("verdict", Varchar),
            ("reason", Varchar),
            ("files_before", Bigint),
            ("files_after", Bigint),
            ("small_files_before", Bigint),
            ("input_files", Bigint),
            ("output_files", Bigint),
            ("bytes_rewritten", Bigint),
            ("dry_run", Boolean),
            ("snapshot_id", Bigint),
            ("metadata_location", Varchar),
            ("delete_files", Bigint),
            ("delete_files_removed", Bigint),
            ("rows_purged", Bigint),
            ("executor", Varchar),
            ("executor_reason", Varchar),
            ("strategy", Varchar),
            ("warning", Varchar),
            ("method", Varchar),
            ("method_reason", Varchar),
            ("commit", Varchar),
        ]
    }

    fn parse(args: &Args) -> Result<Self::Input> {
        let table = args.required_string(0, "table")?;
        let options = compaction_options(args, false)?;
        Ok(CompactInput {
            table,
            locate: args.locate_options()?,
            options,
            executor: executor_options(args)?,
            dry_run: args.bool("dry_run", false)?,
            format_only: FormatOnly::given(|name| args.given(name)),
        })
    }

    fn run(input: &Self::Input, host: &HostDb) -> Result<Vec<Vec<Cell>>> {
        let table = crate::table::Table::open(&input.table, &input.locate)?;
        input.format_only.refuse(table.format())?;
        let executed = compact_with_executor(
            Opened { table: &table, name: &input.table, locate: &input.locate },
            &input.options,
            &input.executor,
            input.dry_run,
            host,
            None,
        )?;
        if let Some(error) = executed.failure_error() {
            return Err(error);
        }
        // Spark's partitions: files after from the table as Spark left it.
        let after = if executed.spark.values().any(|o| o.snapshot_id.is_some()) {
            crate::profile::table_profile(
                &crate::table::Table::open(&input.table, &input.locate)?,
                &input.options.verdict_thresholds(),
            )?
        } else {
            Vec::new()
        };
        let report = &executed.report;
        Ok(report
            .plans
            .iter()
            .map(|p| {
                // A plan that does not compact has no groups: files_after == files_before and
                // nothing is rewritten, so the plan's own figures serve every verdict.
                let verdict = match (p.verdict, report.dry_run) {
                    (Verdict::Compact, true) => "would compact",
                    (Verdict::Compact, false) => "compacted",
                    (other, _) => other.as_str(),
                };
                let route = executed.routes.get(&p.key).filter(|_| p.verdict == Verdict::Compact);
                let spark = executed.spark.get(&p.key);
                let (files_after, outputs, bytes, snapshot, location) = match spark {
                    Some(o) => (
                        after
                            .iter()
                            .find(|a| a.key == p.key)
                            .map_or(p.files_before - o.files_rewritten + o.files_added, |a| a.total_files),
                        o.files_added,
                        o.bytes_rewritten,
                        o.snapshot_id,
                        None,
                    ),
                    None => (
                        p.files_after(),
                        p.groups.len() as u64,
                        p.bytes_to_rewrite,
                        // With partial progress each batch has its own commit.
                        report.outcomes.get(&p.key).map_or(report.snapshot_id, |o| o.snapshot_id),
                        report.metadata_location.clone(),
                    ),
                };
                let input_files = spark.map_or(p.input_files(), |o| o.files_rewritten);
                // Spark's partitions are Spark's to write.
                let (method, method_reason) = if spark.is_some() { (None, None) } else { report.method(&p.key) };
                let text = |v: Option<&str>| v.map_or(Cell::Null, |v| Cell::Text(v.into()));
                vec![
                    Cell::Text(p.partition.clone()),
                    Cell::Int(p.spec_id),
                    Cell::Text(verdict.to_string()),
                    Cell::Text(p.reason.clone()),
                    Cell::BigInt(p.files_before as i64),
                    Cell::BigInt(files_after as i64),
                    Cell::BigInt(p.small_files_before as i64),
                    Cell::BigInt(input_files as i64),
                    Cell::BigInt(outputs as i64),
                    Cell::BigInt(bytes as i64),
                    Cell::Bool(report.dry_run),
                    snapshot.map_or(Cell::Null, Cell::BigInt),
                    location.map_or(Cell::Null, Cell::Text),
                    Cell::BigInt(p.delete_files as i64),
                    Cell::BigInt(p.delete_files_removed as i64),
                    Cell::BigInt(p.rows_purged as i64),
                    route.map_or(Cell::Null, |r| Cell::Text(if r.spark { "spark" } else { "local" }.into())),
                    route.map_or(Cell::Null, |r| Cell::Text(r.why.clone())),
                    if p.verdict == Verdict::Compact { Cell::Text(report.layout.label()) } else { Cell::Null },
                    report.warning.clone().map_or(Cell::Null, Cell::Text),
                    text(method),
                    text(method_reason),
                    report.outcomes.get(&p.key).map_or(Cell::Null, |o| Cell::Text(o.describe())),
                ]
            })
            .collect())
    }
}
