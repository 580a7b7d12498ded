//! Where table files live: local disk and object storage (S3, Azure and Google Cloud Storage).
//!
//! - [`location`]: what a location means, parsed in one place ([`Location`], [`ObjectLocation`]);
//!   nothing else looks at a scheme prefix.
//! - [`object`]: reads, writes, listings and deletes on any object store, through object_store's
//!   `ObjectStore` trait (the one trait every store implements); [`object::store_for`] is the one
//!   place a store's client is chosen.
//! - [`aws_credentials`]: the AWS credential chain (profiles, assume-role, web identity, ECS,
//!   EC2), refreshed before expiry.
//! - [`s3`]: S3's settings, which location they apply to ([`register`]), and its clients.
//! - [`azure`]: Azure Blob Storage / ADLS Gen2 clients and `adls.*` settings.
//! - [`gcs`]: Google Cloud Storage clients and `gcs.*` settings.
//! - [`iceberg_io`]: iceberg-rust's `FileIO` over [`object`].
//! - [`registry`]: settings per table location, by longest prefix.
//! - [`redact`]: store errors without the server's body (which can hold credentials).
//! - [`duckdb`]: readying a nested DuckDB connection for a table's remote data.
//! - [`table_root`]: a table's root ([`TableRoot`]), which store its files may be read from and
//!   which directory its outputs must stay under, whatever its metadata names.
//!
//! Local files are read and written with `std::fs` where they are used: the local commit protocol
//! (atomic rename, `fsync`, Hadoop's checksum companions) is not an object store's, and object
//! storage's (conditional writes) is not a file system's.
//!
//! Credentials are registered per table location by whoever resolved the table ([`register`]):
//! a REST catalog's vended credentials, else the catalog's `s3.*` properties. Secrets never appear
//! in `Debug` output or errors.

pub mod aws_credentials;
pub mod azure;
pub mod duckdb;
pub mod gcs;
pub mod iceberg_io;
pub mod location;
pub mod object;
pub mod redact;
pub mod registry;
pub mod s3;
pub mod table_root;

pub use duckdb::{TableAccess, prepare_remote};
pub use iceberg_io::file_io_for;
pub use location::{
    Location, ObjectLocation, ObjectScheme, canonical, decoded, is_inside, is_remote, location_key, normalize_location,
    strip_file_scheme, uri_to_local_path, url_to_location,
};
pub use object::{
    MAX_IN_FLIGHT, ObjectInfo, any_under, bucket_store, delete_many, exists, head, list, max_in_flight, read,
    read_range, require_conditional_writes, write, write_if_absent,
};
pub use s3::{S3Settings, register, registered};
pub use table_root::TableRoot;

/// Removes files a failed action wrote (best effort: what is left is an orphan that orphan
/// removal finds): local paths from disk, object-store locations in batches.
pub fn remove_quietly<'a>(locations: impl IntoIterator<Item = &'a str>) {
    let mut remote = Vec::new();
    for location in locations {
        if is_remote(location) {
            remote.push(location.to_string());
        } else {
            let _ = std::fs::remove_file(strip_file_scheme(location));
        }
    }
    if !remote.is_empty() {
        let _ = crate::runtime::block_on(delete_many(remote));
    }
}
