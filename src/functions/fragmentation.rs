//! `lakehouse_fragmentation(table, small_file_threshold_mb := 64, fragmentation_ratio_threshold := 0.35,
//! min_input_files := 2, …)`: one row per partition of the current snapshot with its small-file
//! figures and verdict (the compaction planner's: [`crate::profile::Thresholds::assess`]) and
//! its file-size distribution at a glance (`file_sizes`, [`crate::profile::histogram`]).

use duckdb::core::{LogicalTypeHandle, LogicalTypeId};

use super::args::{Args, named};
use super::options::profile::{ProfileInput, parse_profile_input, profile_parameters};
use super::{Cell, RowFunction};
use crate::action::blocked::profile_with_blocked;
use crate::duck::HostDb;
use crate::error::Result;
use crate::profile::{round_mb, round_ratio};

/// The per-partition profile function.
pub struct Fragmentation;

impl RowFunction for Fragmentation {
    const NAME: &'static str = "lakehouse_fragmentation";
    type Input = ProfileInput;

    fn named_parameters() -> Vec<(String, LogicalTypeHandle)> {
        named(&profile_parameters())
    }

    fn columns() -> Vec<(&'static str, LogicalTypeId)> {
        use LogicalTypeId::*;
        vec![
            ("partition", Varchar),
            ("spec_id", Integer),
            ("total_files", Bigint),
            ("small_files", Bigint),
            ("total_size_mb", Double),
            ("avg_file_size_mb", Double),
            ("fragmentation_ratio", Double),
            ("requires_compaction", Boolean),
            ("reason", Varchar),
            ("record_count", Bigint),
            ("delete_files", Bigint),
            ("total_size_bytes", Bigint),
            ("small_size_bytes", Bigint),
            ("dangling_delete_files", Bigint),
            ("file_sizes", Varchar),
            ("file_size_counts", Varchar),
            ("file_size_buckets", Varchar),
            ("compaction_blocked_by", Varchar),
            ("cleanup_blocked_by", Varchar),
        ]
    }

    fn parse(args: &Args) -> Result<Self::Input> {
        parse_profile_input(args)
    }

    fn run(input: &Self::Input, _host: &HostDb) -> Result<Vec<Vec<Cell>>> {
        let legend = crate::profile::histogram_legend(input.thresholds.small_file_threshold_mb);
        let (partitions, blocked) = profile_with_blocked(&input.table, &input.locate, &input.thresholds)?;
        let text = |why: &Option<String>| why.clone().map_or(Cell::Null, Cell::Text);
        Ok(partitions
            .into_iter()
            .map(|p| {
                vec![
                    Cell::Text(p.partition.clone()),
                    Cell::Int(p.spec_id),
                    Cell::BigInt(p.total_files as i64),
                    Cell::BigInt(p.small_files as i64),
                    Cell::Double(round_mb(p.total_size_mb())),
                    Cell::Double(round_mb(p.avg_file_size_mb())),
                    Cell::Double(round_ratio(p.fragmentation_ratio)),
                    Cell::Bool(p.requires_compaction),
                    Cell::Text(p.reason.clone()),
                    Cell::BigInt(p.record_count as i64),
                    Cell::BigInt(p.delete_files as i64),
                    Cell::BigInt(p.total_size_bytes as i64),
                    Cell::BigInt(p.small_size_bytes as i64),
                    Cell::BigInt(p.dangling_delete_files as i64),
                    Cell::Text(p.size_histogram()),
                    Cell::Text(crate::profile::histogram_counts(&p.size_buckets)),
                    Cell::Text(legend.clone()),
                    text(&blocked.compaction),
                    text(&blocked.cleanup),
                ]
            })
            .collect())
    }
}
