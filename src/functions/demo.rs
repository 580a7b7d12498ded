//! `lakehouse_demo(path, scale := 0.001, file_multiplier := 1, snapshots := 16, history_days := 14)`:
//! writes a real fragmented Iceberg table (see [`crate::demo`]) and returns one row describing it.

use std::path::PathBuf;

use duckdb::core::{LogicalTypeHandle, LogicalTypeId};

use super::args::{Args, named};
use super::{Cell, RowFunction};
use crate::demo::{DemoOptions, write_demo};
use crate::duck::HostDb;
use crate::error::Result;

/// The demo-table writer.
pub struct Demo;

impl RowFunction for Demo {
    const NAME: &'static str = "lakehouse_demo";
    type Input = DemoOptions;

    fn named_parameters() -> Vec<(String, LogicalTypeHandle)> {
        named(&["scale", "file_multiplier", "snapshots", "history_days"])
    }

    fn columns() -> Vec<(&'static str, LogicalTypeId)> {
        use LogicalTypeId::*;
        vec![
            ("table_location", Varchar),
            ("metadata_location", Varchar),
            ("partitions", Bigint),
            ("data_files", Bigint),
            ("snapshots", Bigint),
            ("total_bytes", Bigint),
            ("record_count", Bigint),
            ("small_file_threshold_mb", Double),
        ]
    }

    fn parse(args: &Args) -> Result<Self::Input> {
        let defaults = DemoOptions::default();
        let options = DemoOptions {
            path: PathBuf::from(args.required_string(0, "path")?),
            scale: args.f64("scale", defaults.scale)?,
            file_multiplier: args.i64_in("file_multiplier", 1, 1, 10_000)? as u32,
            snapshots: args.i64_in("snapshots", i64::from(defaults.snapshots), 2, 100_000)? as u32,
            history_days: args.i64_in("history_days", i64::from(defaults.history_days), 0, 36_500)? as u32,
        };
        options.validate()?;
        Ok(options)
    }

    fn run(input: &Self::Input, host: &HostDb) -> Result<Vec<Vec<Cell>>> {
        let report = write_demo(input, host)?;
        Ok(vec![vec![
            Cell::Text(report.table_location),
            Cell::Text(report.metadata_location),
            Cell::BigInt(report.partitions as i64),
            Cell::BigInt(report.data_files as i64),
            Cell::BigInt(report.snapshots as i64),
            Cell::BigInt(report.total_bytes as i64),
            Cell::BigInt(report.record_count as i64),
            Cell::Double(report.small_file_threshold_mb),
        ]])
    }
}
