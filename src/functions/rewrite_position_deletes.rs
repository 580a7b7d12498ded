//! `lakehouse_rewrite_position_deletes(table, min_input_files := 2, convert_equality_deletes :=
//! false, dry_run := false, …)`: rewrites an Iceberg table's position delete files (Java's
//! `rewrite_position_delete_files`): per partition, positions of rows no longer live are dropped
//! and the rest (with, asked, the rows equality deletes delete) written as one file (format v2)
//! or as deletion vectors (format v3); one row per partition with deletes to rewrite.

use duckdb::core::{LogicalTypeHandle, LogicalTypeId};

use super::args::{Args, TABLE_PARAMETERS, named};
use super::options::source::OptionSource;
use super::{Cell, RowFunction};
use crate::action::rewrite_position_deletes::{
    RewritePositionDeletesOptions, RewritePositionDeletesReport, rewrite_position_deletes,
};
use crate::duck::HostDb;
use crate::error::{Error, ErrorKind, Result};
use crate::table::LocateOptions;

/// Parsed arguments.
pub struct RewritePositionDeletesInput {
    table: String,
    locate: LocateOptions,
    options: RewritePositionDeletesOptions,
}

/// The position delete rewrite table function.
pub struct RewritePositionDeletes;

impl RowFunction for RewritePositionDeletes {
    const NAME: &'static str = "lakehouse_rewrite_position_deletes";
    const LONG: bool = true;
    type Input = RewritePositionDeletesInput;

    fn named_parameters() -> Vec<(String, LogicalTypeHandle)> {
        let mut names = vec!["min_input_files", "convert_equality_deletes", "dry_run"];
        names.extend(TABLE_PARAMETERS);
        named(&names)
    }

    fn columns() -> Vec<(&'static str, LogicalTypeId)> {
        use LogicalTypeId::*;
        vec![
            ("partition", Varchar),
            ("spec_id", Integer),
            ("action", Varchar),
            ("reason", Varchar),
            ("delete_files_before", Bigint),
            ("deletes_before", Bigint),
            ("delete_files_after", Bigint),
            ("deletes_after", Bigint),
            ("deletion_vectors_replaced", Bigint),
            ("dry_run", Boolean),
            ("snapshot_id", Bigint),
            ("metadata_location", Varchar),
            ("warning", Varchar),
        ]
    }

    fn parse(args: &Args) -> Result<Self::Input> {
        let table = args.required_string(0, "table")?;
        let options = RewritePositionDeletesOptions {
            min_input_files: args.i64_in("min_input_files", 2, 1, i64::from(u32::MAX))? as u64,
            convert_equality_deletes: args.bool("convert_equality_deletes", false)?,
            dry_run: args.bool("dry_run", false)?,
        };
        Ok(RewritePositionDeletesInput { table, locate: args.locate_options()?, options })
    }

    fn run(input: &Self::Input, host: &HostDb) -> Result<Vec<Vec<Cell>>> {
        let table = crate::table::Table::open(&input.table, &input.locate)?;
        let crate::table::Table::Iceberg { located, .. } = &table else {
            return Err(Error::new(
                ErrorKind::Unsupported,
                "Delta tables have no position delete files (their deletion vectors are purged by lakehouse_compact's \
                 delete_ratio_threshold); this function rewrites Iceberg position deletes",
            ));
        };
        Ok(rows(&rewrite_position_deletes(located, &input.options, host)?))
    }
}

/// One row per partition.
pub fn rows(report: &RewritePositionDeletesReport) -> Vec<Vec<Cell>> {
    let count = |n: Option<u64>| n.map_or(Cell::Null, |n| Cell::BigInt(n as i64));
    report
        .partitions
        .iter()
        .map(|p| {
            let action = match (p.rewrites, report.dry_run) {
                (false, _) => "kept",
                (true, true) => "would rewrite",
                (true, false) => "rewritten",
            };
            vec![
                Cell::Text(p.partition.clone()),
                Cell::Int(p.spec_id),
                Cell::Text(action.into()),
                Cell::Text(p.reason.clone()),
                Cell::BigInt(p.delete_files_before as i64),
                Cell::BigInt(p.deletes_before as i64),
                count(p.delete_files_after),
                count(p.deletes_after),
                Cell::BigInt(report.vectors_replaced as i64),
                Cell::Bool(report.dry_run),
                report.snapshot_id.map_or(Cell::Null, Cell::BigInt),
                report.metadata_location.clone().map_or(Cell::Null, Cell::Text),
                report.warning.clone().map_or(Cell::Null, Cell::Text),
            ]
        })
        .collect()
}
