//! `lakehouse_vacuum(table, retention_hours := <table's>, dry_run := true,
//! enforce_retention_duration := true)`: Delta Lake's VACUUM (full) — files no version within
//! the retention references; one row each. A dry run by default.

use duckdb::core::{LogicalTypeHandle, LogicalTypeId};

use super::args::{Args, named};
use super::{Cell, RowFunction};
use crate::action::vacuum::{VacuumOptions, vacuum};
use crate::duck::HostDb;
use crate::error::{Error, ErrorKind, Result};
use crate::table::{LocateOptions, Table};

/// Parsed arguments.
pub struct VacuumInput {
    table: String,
    options: VacuumOptions,
}

/// The VACUUM table function.
pub struct Vacuum;

impl RowFunction for Vacuum {
    const NAME: &'static str = "lakehouse_vacuum";
    const LONG: bool = true;
    type Input = VacuumInput;

    fn named_parameters() -> Vec<(String, LogicalTypeHandle)> {
        named(&["retention_hours", "dry_run", "enforce_retention_duration", "mode"])
    }

    fn columns() -> Vec<(&'static str, LogicalTypeId)> {
        use LogicalTypeId::*;
        vec![
            ("path", Varchar),
            ("size_bytes", Bigint),
            ("modified_at", Timestamp),
            ("reason", Varchar),
            ("action", Varchar),
            ("dry_run", Boolean),
            ("retention_hours", Double),
        ]
    }

    fn parse(args: &Args) -> Result<Self::Input> {
        let retention_hours = args.opt_f64("retention_hours")?;
        if let Some(h) = retention_hours
            && (!h.is_finite() || h < 0.0)
        {
            return Err(Error::invalid(format!("retention_hours must be a number of hours >= 0, got {h}")));
        }
        Ok(VacuumInput {
            table: args.required_string(0, "table")?,
            options: VacuumOptions {
                retention_hours,
                dry_run: args.bool("dry_run", true)?,
                enforce_retention_duration: args.bool("enforce_retention_duration", true)?,
                lite: match args.opt_string("mode", false)?.as_deref().map(str::to_ascii_lowercase).as_deref() {
                    None | Some("full") => false,
                    Some("lite") => true,
                    Some(other) => {
                        return Err(Error::invalid(format!("mode must be 'full' or 'lite', got '{other}'")));
                    }
                },
            },
        })
    }

    fn run(input: &Self::Input, host: &HostDb) -> Result<Vec<Vec<Cell>>> {
        let table = match Table::open(&input.table, &LocateOptions::default())? {
            Table::Delta(table) => table,
            Table::Iceberg { .. } => {
                return Err(Error::new(
                    ErrorKind::Unsupported,
                    format!(
                        "'{}' is an Iceberg table; lakehouse_vacuum works on Delta Lake tables (on Iceberg, \
                         lakehouse_expire_snapshots and lakehouse_remove_orphan_files)",
                        input.table
                    ),
                ));
            }
        };
        let report = vacuum(&table, &input.options, host)?;
        Ok(report
            .files
            .into_iter()
            .map(|f| {
                vec![
                    Cell::Text(f.deleted.deletion.path.clone()),
                    Cell::BigInt(f.deleted.size_bytes as i64),
                    Cell::Timestamp(f.modified_ms.saturating_mul(1000)),
                    Cell::Text(f.reason.as_str().into()),
                    Cell::Text(f.deleted.outcome.describe()),
                    Cell::Bool(report.dry_run),
                    Cell::Double(report.retention_hours),
                ]
            })
            .collect())
    }
}
