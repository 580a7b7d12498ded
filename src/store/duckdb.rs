//! Readying DuckDB for a table's data on object storage: the backend of the table's store
//! ([`super::backend::StoreBackend::prepare_duckdb`]) loads DuckDB's extension for it and leases
//! a temporary secret with the credentials this extension resolved for the table, so that DuckDB
//! reads and writes the data with the same credentials as the metadata ([`super::secret`]); and
//! the name DuckDB reads a table's file by.

use crate::duck::Connection;
use crate::error::Result;

use super::TableRoot;
use super::backend::ObjectLocation;
use super::location::{is_remote, strip_file_scheme};
use super::secret::TableAccess;

/// Readies the host connection for the data of the table at `root` when it is on object storage
/// (through its store's backend: DuckDB's extension for the store loaded, and a temporary secret
/// scoped to the root with the credentials the metadata is read with, unless a secret of the
/// user's covers it and the table has none of its own). A local table needs nothing. Hold the
/// returned value while DuckDB reads or writes the table's files.
pub fn prepare_remote(conn: &Connection, root: &TableRoot) -> Result<TableAccess> {
    let prefix = root.location();
    if !is_remote(&prefix) {
        return Ok(TableAccess::default());
    }
    let object = ObjectLocation::parse(&prefix)?;
    object.scheme.backend().prepare_duckdb(conn, &prefix)
}

/// The name DuckDB reads (or writes) the table file `location` by: a local file by its path (a
/// `file:` prefix removed: DuckDB takes no `file:` URI), an object by its URI.
pub fn duckdb_path(location: &str) -> &str {
    strip_file_scheme(location)
}
