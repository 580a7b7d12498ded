//! Metadata health: the figures that say whether a table's metadata is bloated — snapshots past
//! retention, manifests, metadata.json versions, delete files and orphan files.
//!
//! The verdict is actionable: `requires_expiry` when [`crate::action::expire_snapshots`] would expire
//! something, `requires_orphan_cleanup` when [`crate::action::remove_orphan_files`] would delete something;
//! `metadata_bloated` is either, with the reasons spelled out. Each format measures in its own file
//! ([`iceberg`], [`delta`]).

use crate::duck::HostDb;
use crate::error::Result;
use crate::table::{LocateOptions, Table};

pub mod delta;
pub mod figures;
pub mod iceberg;

pub use figures::{DeltaLogHealth, HealthOptions, MetadataHealth};

/// Opens `table_name` (Iceberg or Delta) and measures its metadata.
pub fn metadata_health(
    table_name: &str,
    locate: &LocateOptions,
    options: &HealthOptions,
    host: &HostDb,
) -> Result<MetadataHealth> {
    options.expiry.validate()?;
    match Table::open(table_name, locate)? {
        Table::Iceberg { table, .. } => iceberg::measure(&table, options),
        Table::Delta(table) => delta::measure(&table, host),
    }
}
