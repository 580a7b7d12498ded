//! `lakehouse_expire_snapshots(table, snapshot_retention_days := 7, retain_last := 1,
//! clean_expired_metadata := false, dry_run := false, …)`: expire snapshots past retention and
//! delete the files only they reached (and, asked, drop the partition specs and schemas no
//! snapshot left uses); one row per expired snapshot, removed ref, dropped spec or schema and
//! deleted file.

use duckdb::core::{LogicalTypeHandle, LogicalTypeId};

use super::args::{Args, named};
use super::options::expire::{expire_options, expire_parameters};
use super::{Cell, RowFunction};
use crate::action::expire_snapshots::{ExpiryOptions, ExpiryReport, expire};
use crate::duck::HostDb;
use crate::error::Result;
use crate::table::LocateOptions;

/// Parsed arguments.
pub struct ExpireInput {
    table: String,
    locate: LocateOptions,
    options: ExpiryOptions,
}

/// The expiry table function.
pub struct ExpireSnapshots;

impl RowFunction for ExpireSnapshots {
    const NAME: &'static str = "lakehouse_expire_snapshots";
    const LONG: bool = true;
    type Input = ExpireInput;

    fn named_parameters() -> Vec<(String, LogicalTypeHandle)> {
        named(&expire_parameters())
    }

    fn columns() -> Vec<(&'static str, LogicalTypeId)> {
        use LogicalTypeId::*;
        vec![
            ("kind", Varchar),
            ("snapshot_id", Bigint),
            ("snapshot_timestamp", Timestamp),
            ("path", Varchar),
            ("size_bytes", Bigint),
            ("action", Varchar),
            ("dry_run", Boolean),
            ("metadata_location", Varchar),
            ("warning", Varchar),
        ]
    }

    fn parse(args: &Args) -> Result<Self::Input> {
        let table = args.required_string(0, "table")?;
        let (locate, options) = expire_options(args)?;
        Ok(ExpireInput { table, locate, options })
    }

    fn run(input: &Self::Input, _host: &HostDb) -> Result<Vec<Vec<Cell>>> {
        Ok(rows(&expire(&crate::table::locate(&input.table, &input.locate)?, &input.options)?))
    }
}

/// The report as rows: snapshots (oldest first), removed refs, then files by kind and path.
pub fn rows(report: &ExpiryReport) -> Vec<Vec<Cell>> {
    let dry = report.dry_run;
    let location = || report.metadata_location.clone().map_or(Cell::Null, Cell::Text);
    let warning = || report.warning.clone().map_or(Cell::Null, Cell::Text);
    let mut out = Vec::new();
    for s in &report.expired {
        out.push(vec![
            Cell::Text("snapshot".into()),
            Cell::BigInt(s.snapshot_id),
            Cell::Timestamp(s.timestamp_ms.saturating_mul(1000)),
            Cell::Null,
            Cell::Null,
            Cell::Text(if dry { "would expire" } else { "expired" }.into()),
            Cell::Bool(dry),
            location(),
            warning(),
        ]);
    }
    for name in &report.refs_removed {
        out.push(vec![
            Cell::Text("ref".into()),
            Cell::Null,
            Cell::Null,
            Cell::Text(name.clone()),
            Cell::Null,
            Cell::Text(if dry { "would remove: aged out" } else { "removed: aged out" }.into()),
            Cell::Bool(dry),
            location(),
            warning(),
        ]);
    }
    let dropped = |what: &str, id: i32| {
        vec![
            Cell::Text(what.into()),
            Cell::Null,
            Cell::Null,
            Cell::Text(format!("{what} {id}")),
            Cell::Null,
            Cell::Text(if dry { "would remove: unused" } else { "removed: unused" }.into()),
            Cell::Bool(dry),
            location(),
            warning(),
        ]
    };
    out.extend(report.unused.specs.iter().map(|&id| dropped("partition_spec", id)));
    out.extend(report.unused.schemas.iter().map(|&id| dropped("schema", id)));
    for f in &report.files {
        out.push(vec![
            Cell::Text(f.deletion.kind.as_str().into()),
            f.deletion.snapshot_id.map_or(Cell::Null, Cell::BigInt),
            Cell::Null,
            Cell::Text(f.deletion.path.clone()),
            Cell::BigInt(f.size_bytes as i64),
            Cell::Text(f.outcome.describe()),
            Cell::Bool(dry),
            location(),
            warning(),
        ]);
    }
    out
}
