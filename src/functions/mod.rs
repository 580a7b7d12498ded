//! SQL functions, one file each, and [`register`], which registers them all. They stand on a
//! small shared machinery for row-returning table functions ([`row_function`], re-exported
//! here), which none of them registers and which uses none of them.

pub mod args;
pub mod compact;
pub mod compact_scalar;
pub mod demo;
pub mod expire_scalar;
pub mod expire_snapshots;
pub mod fragmentation;
pub mod fragmentation_summary;
pub mod gate;
pub mod history;
pub mod json_options;
pub mod metadata_health;
pub mod notify_slack;
pub mod remove_orphan_files;
pub mod rewrite_manifests;
pub mod rewrite_position_deletes;
pub mod row_function;
pub mod scorecard_rows;
pub mod serve;
pub mod vacuum;

pub use row_function::{Cell, PROGRESS_PARAMETER, RowFunction, Table};

use crate::duck::HostDb;

/// Registers every SQL function on `connection`.
pub fn register(connection: &duckdb::Connection, host: HostDb) -> duckdb::Result<()> {
    connection.register_table_function_with_extra_info::<Table<fragmentation::Fragmentation>, _>(
        fragmentation::Fragmentation::NAME,
        &host,
    )?;
    connection.register_table_function_with_extra_info::<Table<fragmentation_summary::FragmentationSummary>, _>(
        fragmentation_summary::FragmentationSummary::NAME,
        &host,
    )?;
    connection.register_table_function_with_extra_info::<Table<demo::Demo>, _>(demo::Demo::NAME, &host)?;
    connection.register_table_function_with_extra_info::<Table<compact::Compact>, _>(compact::Compact::NAME, &host)?;
    connection.register_scalar_function_with_state::<compact_scalar::CompactScalar>(compact::Compact::NAME, &host)?;
    connection.register_table_function_with_extra_info::<Table<expire_snapshots::ExpireSnapshots>, _>(
        expire_snapshots::ExpireSnapshots::NAME,
        &host,
    )?;
    connection.register_scalar_function_with_state::<expire_scalar::ExpireScalar>(
        expire_snapshots::ExpireSnapshots::NAME,
        &host,
    )?;
    connection.register_table_function_with_extra_info::<Table<metadata_health::MetadataHealthFn>, _>(
        metadata_health::MetadataHealthFn::NAME,
        &host,
    )?;
    connection.register_table_function_with_extra_info::<Table<remove_orphan_files::RemoveOrphanFiles>, _>(
        remove_orphan_files::RemoveOrphanFiles::NAME,
        &host,
    )?;
    connection.register_table_function_with_extra_info::<Table<vacuum::Vacuum>, _>(vacuum::Vacuum::NAME, &host)?;
    connection.register_table_function_with_extra_info::<Table<rewrite_manifests::RewriteManifests>, _>(
        rewrite_manifests::RewriteManifests::NAME,
        &host,
    )?;
    connection.register_table_function_with_extra_info::<Table<rewrite_position_deletes::RewritePositionDeletes>, _>(
        rewrite_position_deletes::RewritePositionDeletes::NAME,
        &host,
    )?;
    connection.register_table_function_with_extra_info::<Table<gate::Gate>, _>(gate::Gate::NAME, &host)?;
    connection.register_table_function_with_extra_info::<Table<serve::Serve>, _>(serve::Serve::NAME, &host)?;
    connection.register_scalar_function_with_state::<notify_slack::NotifySlack>("lakehouse_notify_slack", &host)?;
    connection.register_scalar_function::<crate::action::layout::ZorderKey>("lakehouse_zorder_key")?;
    Ok(())
}
