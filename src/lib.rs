//! # lakehouse — the maintenance gate for Apache Iceberg tables, inside DuckDB
//!
//! A DuckDB loadable extension that profiles small-file fragmentation per partition, compacts
//! the degraded partitions, expires snapshots and removes orphan files (the gate and its Slack
//! scorecard are to come). Metadata is read and written in Rust through iceberg-rust; data files
//! are written by DuckDB itself on a nested connection.
//!
//! ## Layout
//!
//! - [`error`]: `Error { kind, message, context }` and the crate's `Result`.
//! - [`table`]: locating a table (metadata.json path, table directory, SQL-catalog identifier)
//!   and the format-neutral model ([`table::DataFile`]); [`table::iceberg`] reads the current
//!   snapshot's live files, [`table::partition`] prints partition labels, [`table::catalog`]
//!   resolves identifiers the way pyiceberg does, [`table::reach`] reads what many snapshots
//!   reference (each distinct manifest once).
//! - [`profile`]: fragmentation figures per partition and the summary row (pure).
//! - [`health`]: metadata-bloat figures (snapshots past retention, manifests, metadata files,
//!   orphans) and their verdict.
//! - [`plan`]: pure planners; [`plan::compaction`] bin-packs small files of degraded partitions,
//!   [`plan::expiry`] finds the files only expired snapshots reach.
//! - [`action`]: executes plans; [`action::compact`] rewrites through DuckDB and commits one
//!   `replace` snapshot ([`table::commit`] makes a metadata file current atomically);
//!   [`action::expire`] commits the expiry and then deletes; [`action::orphans`] finds and
//!   deletes unreferenced files.
//! - [`demo`]: writes the fragmented demo table.
//! - [`duck`]: the nested host connection and SQL quoting (the only place SQL text is built).
//! - [`runtime`]: the Tokio runtime iceberg-rust's async I/O runs on.
//! - [`interrupt`]: Ctrl-C recorded while long work runs, checked between its steps.
//! - [`functions`]: one file per SQL function, on a shared row-function adapter that parses
//!   arguments at bind and prefixes every error with the function's name.

pub mod action;
pub mod demo;
pub mod duck;
pub mod error;
pub mod functions;
pub mod health;
pub mod interrupt;
pub mod notify;
pub mod plan;
pub mod profile;
pub mod runtime;
pub mod table;

use std::error::Error as StdError;

/// Rust's allocations in this library (manifest decoding allocates and frees millions of small
/// values) go to mimalloc; DuckDB's own memory is untouched. Built with `local_dynamic_tls`: a
/// library that is `dlopen`ed (every DuckDB extension) must not use the static TLS block, which
/// a Python process that has loaded many libraries (pyarrow, dbt) may have used up.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use duckdb::{Connection, duckdb_entrypoint_c_api};

/// Registers the extension's functions; called by DuckDB on `LOAD`.
#[duckdb_entrypoint_c_api(ext_name = "lakehouse", min_duckdb_version = "v1.2.0")]
pub fn extension_entrypoint(connection: Connection) -> Result<(), Box<dyn StdError>> {
    let host = duck::HostDb::new(connection.try_clone()?);
    functions::register(&connection, host)?;
    Ok(())
}
