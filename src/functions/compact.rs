//! `lakehouse_compact(table, small_file_threshold_mb := 64, fragmentation_ratio_threshold := 0.35,
//! target_file_size_mb := 128, min_input_files := 2, partitions := NULL, apply_deletes := true,
//! executor := 'local', spark_remote := NULL, spark_catalog := NULL, local_max_partition_mb := 10240,
//! partial_progress := false, max_commits := 10, dry_run := false, …)`: bin-pack compaction of
//! degraded partitions (merge-on-read ones with their delete files applied), here or on Spark
//! ([`crate::action::executor`]), one row per partition considered; its `commit` column says what
//! the partition's commit did ([`crate::action::compact::progress`]).

use duckdb::core::{LogicalTypeHandle, LogicalTypeId};

use super::args::{Args, named};
use super::options::compact::{CompactOptions, compact_options, compact_parameters, executor_options};
use super::{Cell, RowFunction};
use crate::action::executor::{ExecutorOptions, Opened, compact_with_executor};
use crate::duck::HostDb;
use crate::error::Result;
use crate::plan::compaction::Verdict;

/// Parsed arguments.
pub struct CompactInput {
    table: String,
    options: CompactOptions,
    executor: ExecutorOptions,
}

/// The compaction table function.
pub struct Compact;

impl RowFunction for Compact {
    const NAME: &'static str = "lakehouse_compact";
    const LONG: bool = true;
    type Input = CompactInput;

    fn named_parameters() -> Vec<(String, LogicalTypeHandle)> {
        named(&compact_parameters(true))
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
        let options = compact_options(args)?;
        Ok(CompactInput { table, options, executor: executor_options(args)? })
    }

    fn run(input: &Self::Input, host: &HostDb) -> Result<Vec<Vec<Cell>>> {
        let CompactOptions { locate, compaction, dry_run, format_only } = &input.options;
        let table = crate::table::Table::open(&input.table, locate)?;
        format_only.refuse(table.format())?;
        let executed = compact_with_executor(
            Opened { table: &table, name: &input.table, locate },
            compaction,
            &input.executor,
            *dry_run,
            host,
            None,
        )?;
        if let Some(error) = executed.failure_error() {
            return Err(error);
        }
        // Spark's partitions: files after from the table as Spark left it.
        let after = if executed.spark.values().any(|o| o.snapshot_id.is_some()) {
            crate::profile::table_profile(&table.reload()?, &compaction.verdict_thresholds())?
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
