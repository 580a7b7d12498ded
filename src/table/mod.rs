//! Opening a table from what the user typed: the [`Table`] enum, which holds a format's state,
//! its opener and its reload. The format-neutral model the profile and the planners use is in
//! [`model`] (re-exported here), which the formats depend on and nothing of theirs; where an
//! Iceberg table's current metadata is, in [`locate`](mod@locate).
//!
//! `table` may be a Delta Lake table directory (one with `_delta_log/`, [`delta`]), a path to an
//! Iceberg `*.metadata.json`, an Iceberg table directory, or a catalog identifier
//! (`namespace.table`, `catalog.namespace.table`) resolved through an Iceberg SQL catalog
//! configured the way pyiceberg users configure theirs ([`crate::catalog`]). [`Table::open`] reads the
//! table once per call; profile, planners and actions take the handle.

pub mod deleted_rows;
pub mod delta;
pub mod iceberg;
pub mod locate;
pub mod model;
mod not_a_table;
pub mod summary;

use std::path::PathBuf;

pub use locate::{LocateOptions, Located, hadoop_version, is_metadata_file_name, locate, metadata_version};
pub use model::{DataFile, FileContent, PartitionKey, TableFormat, UNPARTITIONED};

use crate::error::Result;
use crate::store::{Location, TableRoot};
use locate::locate_at;

/// A table opened for one call: the format's state, read once.
#[derive(Debug)]
pub enum Table {
    /// An Iceberg table, and where its current metadata was found.
    Iceberg {
        /// Where the metadata is, and how it was found (catalog entry or path).
        located: Located,
        /// The metadata as read.
        table: iceberg::IcebergTable,
    },
    /// A Delta Lake table at its latest version.
    Delta(delta::DeltaLakeTable),
}

impl Table {
    /// The table's root: where its files may be read from and its outputs go
    /// ([`Located::root`], [`delta::DeltaLakeTable::table_root`]).
    pub fn root(&self) -> Result<TableRoot> {
        match self {
            Table::Iceberg { located, .. } => located.root(),
            Table::Delta(table) => table.table_root(),
        }
    }

    /// Opens `name`: a Delta table directory, else an Iceberg table ([`locate()`]).
    pub fn open(name: &str, options: &LocateOptions) -> Result<Table> {
        let location = Location::parse(name.trim())?;
        if location.is_remote() {
            crate::catalog::register_configured(name.trim().trim_end_matches('/'), &options.catalog)?;
        }
        if let Some(dir) = delta_dir_at(name, &location) {
            return Ok(Table::Delta(delta::DeltaLakeTable::load(&dir)?));
        }
        let located = locate_at(name, &location, options)?;
        let table = iceberg::IcebergTable::load(&located.metadata_location)?;
        Ok(Table::Iceberg { located, table })
    }

    /// The table as it is now: its catalog (or version hint, or newest metadata file) asked
    /// again for an Iceberg table, the log read again for a Delta table.
    pub fn reload(&self) -> Result<Table> {
        match self {
            Table::Iceberg { located, .. } => {
                let located = iceberg::commit::relocate(located)?;
                let table = iceberg::IcebergTable::load(&located.metadata_location)?;
                Ok(Table::Iceberg { located, table })
            }
            Table::Delta(table) => Ok(Table::Delta(delta::DeltaLakeTable::load(&table.root)?)),
        }
    }

    /// The table's format.
    pub fn format(&self) -> TableFormat {
        match self {
            Table::Iceberg { .. } => TableFormat::Iceberg,
            Table::Delta(_) => TableFormat::Delta,
        }
    }

    /// Every live data and delete file of the current snapshot (version).
    pub fn live_files(&self) -> Result<Vec<DataFile>> {
        match self {
            Table::Iceberg { table, .. } => table.live_files(),
            Table::Delta(table) => Ok(table.model_files()),
        }
    }
}

/// The directory of the Delta table `name` names, if it names one.
pub fn delta_dir(name: &str) -> Option<PathBuf> {
    delta_dir_at(name, &Location::parse(name.trim()).ok()?)
}

/// [`delta_dir`] of `name`, parsed as `location`.
fn delta_dir_at(name: &str, location: &Location) -> Option<PathBuf> {
    match location {
        Location::Object(_) => {
            let root = name.trim().trim_end_matches('/');
            let log = format!("{root}/_delta_log");
            let found = crate::runtime::block_on(crate::store::any_under(&log)).ok().and_then(Result::ok);
            found.unwrap_or(false).then(|| PathBuf::from(root))
        }
        Location::Local(path) => delta::is_delta_dir(path).then(|| path.clone()),
    }
}

/// The format of the table `name` names, from its layout alone (reads nothing): for messages
/// that must be right even when the table cannot be read.
pub fn detect_format(name: &str) -> TableFormat {
    if delta_dir(name).is_some() { TableFormat::Delta } else { TableFormat::Iceberg }
}
