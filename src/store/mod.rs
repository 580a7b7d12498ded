//! Where table files live: local disk and object storage (S3, Azure and Google Cloud Storage).
//!
//! - [`backend`]: what a store is ([`StoreBackend`]): its schemes, its settings from a
//!   catalog's properties, its object_store client, its DuckDB secret, its Delta log store.
//!   [`s3`], [`azure`] and [`gcs`] are the backends (each with its settings, which location they
//!   apply to, and its clients); [`stores`] lists them ([`stores::STORES`], the one list
//!   everything dispatches through by scheme). **A new store** is a file beside `s3.rs`
//!   implementing [`StoreBackend`], its `pub mod` line here, and its line in [`stores::STORES`].
//! - [`location`]: what a location means, parsed in one place ([`Location`], [`ObjectLocation`],
//!   [`local_path`]); nothing outside `store` looks at a scheme prefix.
//! - [`local`]: what only a local file needs (a flush, a parent directory, its real path).
//! - [`object`]: reads, writes, listings and deletes on any object store, through object_store's
//!   `ObjectStore` trait (the one trait every store implements), with the client of the
//!   location's backend ([`object::store_for`]).
//! - [`aws_credentials`]: the AWS credential chain (profiles, assume-role, web identity, ECS,
//!   EC2), refreshed before expiry.
//! - [`iceberg_io`]: iceberg-rust's `FileIO` over [`object`].
//! - [`registry`]: settings per table location, by longest prefix.
//! - [`redact`]: store errors without the server's body (which can hold credentials).
//! - [`secret`]: what a backend readies DuckDB with; [`duckdb`]: readying a nested DuckDB
//!   connection for a table's remote data (through the table's backend), and the name DuckDB
//!   reads a table file by ([`duckdb_path`]).
//! - [`table_root`]: a table's root ([`TableRoot`]), which store its files may be read from and
//!   which directory its outputs must stay under, whatever its metadata names.
//!
//! Local files are read and written with `std::fs` where they are used: the local commit protocol
//! (atomic rename, `fsync`, Hadoop's checksum companions) is not an object store's, and object
//! storage's (conditional writes) is not a file system's. Where a caller treats the two apart it
//! asks [`local_path`] (or [`Location::parse`]), never the scheme.
//!
//! Credentials are registered per table location by whoever resolved the table ([`register`]):
//! a REST catalog's vended credentials, else the catalog's `s3.*` properties. Secrets never appear
//! in `Debug` output or errors.

pub mod aws_credentials;
pub mod azure;
pub mod backend;
pub mod duckdb;
pub mod gcs;
pub mod iceberg_io;
pub mod local;
pub mod location;
pub mod object;
pub mod redact;
pub mod registry;
pub mod s3;
pub mod secret;
pub mod stores;
pub mod table_root;

pub use backend::{ObjectLocation, ObjectScheme, StoreBackend};
pub use duckdb::{duckdb_path, prepare_remote};
pub use iceberg_io::file_io_for;
pub use local::{create_parent_dir, local_real_path, sync_local};
pub use location::{
    Location, decoded, is_inside, local_path, location_key, normalize_location, uri_to_local_path, url_to_location,
};
pub use object::{
    MAX_IN_FLIGHT, ObjectInfo, any_under, bucket_store, delete_many, exists, head, list, max_in_flight, read,
    read_range, require_conditional_writes, write, write_if_absent,
};
pub use s3::{S3Settings, register, registered};
pub use secret::TableAccess;
pub use stores::{canonical, delta_log_stores, register_properties};
pub use table_root::TableRoot;

/// Removes files a failed action wrote (best effort: what is left is an orphan that orphan
/// removal finds): local paths from disk, object-store locations in batches.
pub fn remove_quietly<'a>(locations: impl IntoIterator<Item = &'a str>) {
    let mut remote = Vec::new();
    for location in locations {
        match local_path(location) {
            Some(local) => {
                let _ = std::fs::remove_file(local);
            }
            None => remote.push(location.to_string()),
        }
    }
    if !remote.is_empty() {
        let _ = crate::runtime::block_on(delete_many(remote));
    }
}
