//! SQL functions, one file each, and [`FUNCTIONS`], the one list [`register`] registers. They
//! stand on a small shared machinery none of them registers and which uses none of them:
//! [`row_function`] (row-returning table functions, re-exported here), [`args`] and
//! [`json_options`] (named arguments, an options JSON), [`options`] (each verb's options and
//! their one parser, which the gate and the server share) and [`gate_runs`] (a gate run's rows
//! and history, the gate's and the server's).
//!
//! A new SQL function is its file here (a [`RowFunction`], or a [`json_options::NamedScalar`]),
//! its `pub mod` line and its entry in [`FUNCTIONS`]; its work goes in `src/action/` (or lower),
//! its options, when another function or the gate shares them, in [`options`].

pub mod args;
pub mod compact;
pub mod compact_scalar;
pub mod demo;
pub mod expire_scalar;
pub mod expire_snapshots;
pub mod fragmentation;
pub mod fragmentation_summary;
pub mod gate;
pub mod gate_runs;
pub mod json_options;
pub mod metadata_health;
pub mod notify_slack;
pub mod options;
pub mod remove_orphan_files;
pub mod rewrite_manifests;
pub mod rewrite_position_deletes;
pub mod row_function;
pub mod serve;
pub mod vacuum;

pub use row_function::{Cell, PROGRESS_PARAMETER, RowFunction, Table};

use crate::duck::HostDb;

/// Registers one SQL function (or one form of one) on a connection.
pub type Registration = fn(&duckdb::Connection, &HostDb) -> duckdb::Result<()>;

/// Every SQL function, registered in this order by [`register`]: a table function's entry is
/// `table::<F>`, a scalar's on the host database `scalar::<S>` (a scalar and a table function of
/// one name are its two forms).
pub const FUNCTIONS: &[Registration] = &[
    table::<fragmentation::Fragmentation>,
    table::<fragmentation_summary::FragmentationSummary>,
    table::<demo::Demo>,
    table::<compact::Compact>,
    scalar::<compact_scalar::CompactScalar>,
    table::<expire_snapshots::ExpireSnapshots>,
    scalar::<expire_scalar::ExpireScalar>,
    table::<metadata_health::MetadataHealthFn>,
    table::<remove_orphan_files::RemoveOrphanFiles>,
    table::<vacuum::Vacuum>,
    table::<rewrite_manifests::RewriteManifests>,
    table::<rewrite_position_deletes::RewritePositionDeletes>,
    table::<gate::Gate>,
    table::<serve::Serve>,
    scalar::<notify_slack::NotifySlack>,
    |connection, _| connection.register_scalar_function::<crate::action::layout::ZorderKey>("lakehouse_zorder_key"),
];

/// Registers the row-returning table function `F`.
fn table<F: RowFunction>(connection: &duckdb::Connection, host: &HostDb) -> duckdb::Result<()> {
    connection.register_table_function_with_extra_info::<Table<F>, _>(F::NAME, host)
}

/// Registers the scalar `S`, which runs on the host database.
fn scalar<S: json_options::NamedScalar>(connection: &duckdb::Connection, host: &HostDb) -> duckdb::Result<()> {
    connection.register_scalar_function_with_state::<S>(S::NAME, host)
}

/// Registers every SQL function of [`FUNCTIONS`] on `connection`.
pub fn register(connection: &duckdb::Connection, host: HostDb) -> duckdb::Result<()> {
    FUNCTIONS.iter().try_for_each(|register| register(connection, &host))
}
