//! `lakehouse_fragmentation_summary(table, …, target_file_size_mb := 128)`: the reference flow's
//! single summary row (rounded as the flow rounds it), the projected speedup as a range
//! ([`crate::plan::projection`]), plus the exact compactable bytes.

use duckdb::core::{LogicalTypeHandle, LogicalTypeId};

use super::args::{Args, named};
use super::options::profile::{ProfileInput, parse_profile_input, profile_parameters};
use super::{Cell, RowFunction};
use crate::action::blocked::profile_with_blocked;
use crate::duck::HostDb;
use crate::error::Result;
use crate::plan::compaction::check_sizing;
use crate::plan::projection;
use crate::profile::{round_mb, round_ratio, round_to, summarize};

/// Profile arguments plus the compaction target.
pub struct SummaryInput {
    profile: ProfileInput,
    target_file_size_mb: f64,
}

/// The one-row summary function.
pub struct FragmentationSummary;

impl RowFunction for FragmentationSummary {
    const NAME: &'static str = "lakehouse_fragmentation_summary";
    type Input = SummaryInput;

    fn named_parameters() -> Vec<(String, LogicalTypeHandle)> {
        let mut names = profile_parameters();
        names.push("target_file_size_mb");
        named(&names)
    }

    fn columns() -> Vec<(&'static str, LogicalTypeId)> {
        use LogicalTypeId::*;
        vec![
            ("total_partitions", Bigint),
            ("total_lakehouse_files", Bigint),
            ("total_small_files", Bigint),
            ("fragmented_partition_count", Bigint),
            ("avg_fragmentation_ratio", Double),
            ("compactable_mb", Double),
            ("projected_speedup_low", Double),
            ("projected_speedup_high", Double),
            ("compactable_bytes", Bigint),
            ("compaction_blocked_by", Varchar),
            ("cleanup_blocked_by", Varchar),
        ]
    }

    fn parse(args: &Args) -> Result<Self::Input> {
        let profile = parse_profile_input(args)?;
        let target_file_size_mb = args.f64("target_file_size_mb", 128.0)?;
        // Compaction's own check: a target the compaction refuses is refused here too.
        check_sizing(&profile.thresholds, target_file_size_mb)?;
        Ok(SummaryInput { profile, target_file_size_mb })
    }

    fn run(input: &Self::Input, _host: &HostDb) -> Result<Vec<Vec<Cell>>> {
        let (partitions, blocked) =
            profile_with_blocked(&input.profile.table, &input.profile.locate, &input.profile.thresholds)?;
        let s = summarize(&partitions);
        let speedup = projection::of_profile(&partitions, input.target_file_size_mb);
        Ok(vec![vec![
            Cell::BigInt(s.total_partitions as i64),
            Cell::BigInt(s.total_lakehouse_files as i64),
            Cell::BigInt(s.total_small_files as i64),
            Cell::BigInt(s.fragmented_partition_count as i64),
            Cell::Double(round_ratio(s.avg_fragmentation_ratio)),
            Cell::Double(round_mb(s.compactable_mb())),
            Cell::Double(round_to(speedup.low, 2)),
            Cell::Double(round_to(speedup.high, 2)),
            Cell::BigInt(s.compactable_bytes as i64),
            blocked.compaction.map_or(Cell::Null, Cell::Text),
            blocked.cleanup.map_or(Cell::Null, Cell::Text),
        ]])
    }
}
