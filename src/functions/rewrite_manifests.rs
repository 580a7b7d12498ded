//! `lakehouse_rewrite_manifests(table, target_manifest_size_mb := NULL, dry_run := false, …)`:
//! merges the current snapshot's small manifests (Spark's `rewrite_manifests`), one row per
//! content (data, deletes) and partition spec.

use duckdb::core::{LogicalTypeHandle, LogicalTypeId};

use super::args::{Args, TABLE_PARAMETERS, named};
use super::options::source::OptionSource;
use super::{Cell, RowFunction};
use crate::action::rewrite_manifests::{
    ManifestsToMerge, RewriteManifestsOptions, RewriteManifestsReport, rewrite_manifests,
};
use crate::duck::HostDb;
use crate::error::{Error, ErrorKind, Result};
use crate::table::LocateOptions;

/// Parsed arguments.
pub struct RewriteManifestsInput {
    table: String,
    locate: LocateOptions,
    options: RewriteManifestsOptions,
}

/// The manifest rewrite table function.
pub struct RewriteManifests;

/// Reads `target_manifest_size_mb` (absent or NULL: the table's property) into bytes.
pub fn target_bytes(args: &Args) -> Result<Option<u64>> {
    match args.opt_f64("target_manifest_size_mb")? {
        None => Ok(None),
        Some(mb) if mb.is_finite() && mb > 0.0 && mb <= 1024.0 => {
            Ok(Some((mb * 1024.0 * 1024.0).round().max(1.0) as u64))
        }
        Some(mb) => Err(Error::invalid(format!("target_manifest_size_mb must be in (0, 1024], got {mb}"))),
    }
}

impl RowFunction for RewriteManifests {
    const NAME: &'static str = "lakehouse_rewrite_manifests";
    const LONG: bool = true;
    type Input = RewriteManifestsInput;

    fn named_parameters() -> Vec<(String, LogicalTypeHandle)> {
        let mut names = vec!["target_manifest_size_mb", "dry_run"];
        names.extend(TABLE_PARAMETERS);
        named(&names)
    }

    fn columns() -> Vec<(&'static str, LogicalTypeId)> {
        use LogicalTypeId::*;
        vec![
            ("content", Varchar),
            ("spec_id", Integer),
            ("action", Varchar),
            ("reason", Varchar),
            ("manifests_before", Bigint),
            ("small_manifests", Bigint),
            ("manifests_after", Bigint),
            ("entries_rewritten", Bigint),
            ("bytes_before", Bigint),
            ("bytes_after", Bigint),
            ("target_manifest_bytes", Bigint),
            ("dry_run", Boolean),
            ("snapshot_id", Bigint),
            ("metadata_location", Varchar),
            ("warning", Varchar),
        ]
    }

    fn parse(args: &Args) -> Result<Self::Input> {
        let table = args.required_string(0, "table")?;
        let options = RewriteManifestsOptions {
            target_bytes: target_bytes(args)?,
            dry_run: args.bool("dry_run", false)?,
            min_small_share: None,
            min_manifests: ManifestsToMerge::Two,
        };
        Ok(RewriteManifestsInput { table, locate: args.locate_options()?, options })
    }

    fn run(input: &Self::Input, _host: &HostDb) -> Result<Vec<Vec<Cell>>> {
        let table = crate::table::Table::open(&input.table, &input.locate)?;
        let crate::table::Table::Iceberg { located, .. } = &table else {
            return Err(Error::new(
                ErrorKind::Unsupported,
                "Delta tables have no manifests (their log is compacted by checkpoints); this function rewrites \
                 Iceberg manifests",
            ));
        };
        Ok(rows(&rewrite_manifests(located, &input.options)?))
    }
}

/// One row per group.
pub fn rows(report: &RewriteManifestsReport) -> Vec<Vec<Cell>> {
    report
        .groups
        .iter()
        .map(|g| {
            let action = match (g.merges(), report.dry_run) {
                (false, _) => "kept",
                (true, true) => "would merge",
                (true, false) => "merged",
            };
            vec![
                Cell::Text(g.content.to_string()),
                Cell::Int(g.spec_id),
                Cell::Text(action.into()),
                Cell::Text(g.reason.clone()),
                Cell::BigInt(g.manifests_before as i64),
                Cell::BigInt(g.small_manifests as i64),
                Cell::BigInt(g.manifests_after as i64),
                Cell::BigInt(g.entries_rewritten as i64),
                Cell::BigInt(g.bytes_before as i64),
                Cell::BigInt(g.bytes_after as i64),
                Cell::BigInt(report.target_bytes as i64),
                Cell::Bool(report.dry_run),
                report.snapshot_id.map_or(Cell::Null, Cell::BigInt),
                report.metadata_location.clone().map_or(Cell::Null, Cell::Text),
                report.warning.clone().map_or(Cell::Null, Cell::Text),
            ]
        })
        .collect()
}
