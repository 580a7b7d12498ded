//! Metadata health: the figures that say whether a table's metadata is bloated — snapshots past
//! retention, manifests, metadata.json versions, delete files and orphan files.
//!
//! The verdict is actionable: `requires_expiry` when [`crate::action::expire_snapshots`] would expire
//! something, `requires_orphan_cleanup` when [`crate::action::remove_orphan_files`] would delete something;
//! `metadata_bloated` is either, with the reasons spelled out. Each format measures in its own file
//! ([`iceberg`], [`delta`]). A table whose features block a maintenance action is measured all
//! the same: what is blocked and why is a figure too ([`crate::action::blocked`]), never an error.

use crate::action::blocked::blocked;
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
    let table = Table::open(table_name, locate)?;
    let blocked = blocked(&table);
    let mut health = match &table {
        Table::Iceberg { table, .. } => iceberg::measure(table, options)?,
        Table::Delta(table) => delta::measure(table, blocked.cleanup.is_none(), host)?,
    };
    health.blocked = blocked;
    Ok(health)
}
