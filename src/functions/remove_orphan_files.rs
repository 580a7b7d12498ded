//! `lakehouse_remove_orphan_files(table, older_than_days := 3, allow_young_orphans := false,
//! dry_run := true, …)`: files under the table location that nothing references, older than the
//! safety window; one row each. A dry run by default: deleting needs `dry_run := false`, and
//! deleting files younger than a day also `allow_young_orphans := true`.

use duckdb::core::{LogicalTypeHandle, LogicalTypeId};

use super::args::{Args, TABLE_PARAMETERS, named};
use super::options::orphans::older_than_days;
use super::options::source::OptionSource;
use super::{Cell, RowFunction};
use crate::action::remove_orphan_files::remove_orphan_files;
use crate::duck::HostDb;
use crate::error::Result;
use crate::table::LocateOptions;

/// Parsed arguments.
pub struct OrphansInput {
    table: String,
    locate: LocateOptions,
    older_than_days: f64,
    allow_young_orphans: bool,
    dry_run: bool,
}

/// The orphan-removal table function.
pub struct RemoveOrphanFiles;

impl RowFunction for RemoveOrphanFiles {
    const NAME: &'static str = "lakehouse_remove_orphan_files";
    const LONG: bool = true;
    type Input = OrphansInput;

    fn named_parameters() -> Vec<(String, LogicalTypeHandle)> {
        let mut names = vec!["older_than_days", "allow_young_orphans", "dry_run"];
        names.extend(TABLE_PARAMETERS);
        named(&names)
    }

    fn columns() -> Vec<(&'static str, LogicalTypeId)> {
        use LogicalTypeId::*;
        vec![
            ("path", Varchar),
            ("size_bytes", Bigint),
            ("modified_at", Timestamp),
            ("action", Varchar),
            ("dry_run", Boolean),
        ]
    }

    fn parse(args: &Args) -> Result<Self::Input> {
        Ok(OrphansInput {
            table: args.required_string(0, "table")?,
            older_than_days: older_than_days(args)?,
            allow_young_orphans: args.bool("allow_young_orphans", false)?,
            dry_run: args.bool("dry_run", true)?,
            locate: args.locate_options()?,
        })
    }

    fn run(input: &Self::Input, _host: &HostDb) -> Result<Vec<Vec<Cell>>> {
        let removed = remove_orphan_files(
            &input.table,
            &input.locate,
            input.older_than_days,
            input.allow_young_orphans,
            input.dry_run,
        )?;
        Ok(removed
            .into_iter()
            .map(|(orphan, done)| {
                vec![
                    Cell::Text(orphan.path),
                    Cell::BigInt(orphan.size_bytes as i64),
                    Cell::Timestamp(orphan.modified_ms.saturating_mul(1000)),
                    Cell::Text(done.outcome.describe()),
                    Cell::Bool(input.dry_run),
                ]
            })
            .collect())
    }
}
