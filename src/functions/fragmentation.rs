//! `lakehouse_fragmentation(table, small_file_threshold_mb := 64, fragmentation_ratio_threshold := 0.35,
//! min_input_files := 2, …)`: one row per partition of the current snapshot with its small-file
//! figures and verdict (the compaction planner's: [`crate::profile::Thresholds::assess`]) and
//! its file-size distribution at a glance (`file_sizes`, [`crate::profile::histogram`]).

use duckdb::core::{LogicalTypeHandle, LogicalTypeId};

use super::args::{Args, TABLE_PARAMETERS, THRESHOLD_PARAMETERS, named};
use super::{Cell, RowFunction};
use crate::duck::HostDb;
use crate::error::Result;
use crate::profile::{DEFAULT_MIN_INPUT_FILES, PartitionProfile, Thresholds, round_mb, round_ratio};
use crate::table::{LocateOptions, Table};

/// The arguments shared by the profile functions.
pub struct ProfileInput {
    /// What the user named the table.
    pub table: String,
    /// How to resolve it.
    pub locate: LocateOptions,
    /// The verdict's thresholds.
    pub thresholds: Thresholds,
}

/// The profile functions' named parameters: the thresholds, `min_input_files`, the table's.
pub fn profile_parameters() -> Vec<&'static str> {
    let mut names = THRESHOLD_PARAMETERS.to_vec();
    names.push("min_input_files");
    names.extend(TABLE_PARAMETERS);
    names
}

/// Parses `table` and the threshold and table options.
pub fn parse_profile_input(args: &Args) -> Result<ProfileInput> {
    let table = args.required_string(0, "table")?;
    let min_input_files = args.i64_in("min_input_files", DEFAULT_MIN_INPUT_FILES as i64, 2, i64::from(u32::MAX))?;
    let thresholds = args.thresholds()?.with_min_input_files(min_input_files as u64)?;
    Ok(ProfileInput { table, locate: args.locate_options()?, thresholds })
}

/// Opens and profiles the table (Iceberg or Delta).
pub fn profile_table(input: &ProfileInput) -> Result<Vec<PartitionProfile>> {
    crate::profile::table_profile(&Table::open(&input.table, &input.locate)?, &input.thresholds)
}

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
        ]
    }

    fn parse(args: &Args) -> Result<Self::Input> {
        parse_profile_input(args)
    }

    fn run(input: &Self::Input, _host: &HostDb) -> Result<Vec<Vec<Cell>>> {
        let legend = crate::profile::histogram_legend(input.thresholds.small_file_threshold_mb);
        Ok(profile_table(input)?
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
                ]
            })
            .collect())
    }
}
