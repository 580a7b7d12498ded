//! What a store is: a [`StoreBackend`], one file per store beside this one (`s3.rs`, `azure.rs`,
//! `gcs.rs`), listed once in [`super::stores::STORES`]. Everything that depends on which store a
//! location is on goes through its backend, found by the location's scheme
//! ([`ObjectLocation::scheme`]): its settings from a catalog's or table's properties, its
//! object_store client, its DuckDB secret, its Delta log store. Local files are no backend: they
//! are read and written with `std::fs` ([`super::location::Location::Local`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use object_store::ObjectStore;

use super::secret::TableAccess;
use crate::duck::Connection;
use crate::error::Result;

/// One object store: everything that differs between stores.
pub trait StoreBackend: Sync {
    /// Its name, as messages and comparisons of stores use it (`S3`, `Azure`, `GCS`).
    fn name(&self) -> &'static str;

    /// The URI schemes it serves (lower case), each with the scheme its locations are written
    /// back with (`("s3a", "s3")`; a scheme written back as itself keeps its spelling).
    fn schemes(&self) -> &'static [(&'static str, &'static str)];

    /// What it is and its schemes, in the message that lists the stores served
    /// (`S3 (s3://)`).
    fn describes(&self) -> &'static str;

    /// Registers the settings among `properties` (a catalog's; keys of this store only, e.g.
    /// `s3.*`) for every location under `prefix` (canonical, [`super::canonical`]), when there are any.
    fn register_properties(&self, prefix: &str, properties: &BTreeMap<String, String>);

    /// The client of the bucket `object` is in, with the settings registered for its location.
    fn client(&self, object: &ObjectLocation) -> Result<Arc<dyn ObjectStore>>;

    /// Readies the host connection for the data of the table whose root is `prefix` (canonical,
    /// no trailing `/`) on this store: DuckDB's extension for it loaded, and a secret with the
    /// credentials the metadata is read with ([`super::secret`]).
    fn prepare_duckdb(&self, conn: &Connection, prefix: &str) -> Result<TableAccess>;

    /// The part of a bucket name two spellings of one bucket share (Azure's `lake` and
    /// `lake@acct.dfs.core.windows.net` name one container).
    fn container<'a>(&self, bucket: &'a str) -> &'a str {
        bucket
    }

    /// The log store delta-rs opens a Delta table on this store with: by default delta-rs's own
    /// (commits by `PutMode::Create`, i.e. `If-None-Match: *`), on the object store given with
    /// the table.
    fn delta_log_store(&self) -> Arc<dyn deltalake_core::logstore::LogStoreFactory> {
        Arc::new(DefaultLogStore)
    }
}

/// delta-rs's default log store, for any scheme.
struct DefaultLogStore;

impl deltalake_core::logstore::LogStoreFactory for DefaultLogStore {
    fn with_options(
        &self,
        prefixed_store: deltalake_core::logstore::ObjectStoreRef,
        root_store: deltalake_core::logstore::ObjectStoreRef,
        location: &url::Url,
        options: &deltalake_core::logstore::StorageConfig,
    ) -> deltalake_core::DeltaResult<Arc<dyn deltalake_core::logstore::LogStore>> {
        Ok(deltalake_core::logstore::default_logstore(prefixed_store, root_store, location, options))
    }
}

/// A store and the scheme its locations are written back with (`s3` for every S3 spelling;
/// Azure's as given: a table's metadata names its files in one spelling, and paths are compared
/// as written). Found by [`ObjectScheme::from_scheme`] among [`super::stores::STORES`].
#[derive(Clone, Copy)]
pub struct ObjectScheme {
    backend: &'static dyn StoreBackend,
    written: &'static str,
}

impl ObjectScheme {
    /// `backend`'s scheme written back as `written`.
    pub(super) fn new(backend: &'static dyn StoreBackend, written: &'static str) -> ObjectScheme {
        ObjectScheme { backend, written }
    }

    /// The scheme as locations are written back.
    pub fn as_str(self) -> &'static str {
        self.written
    }

    /// The store's backend.
    pub fn backend(self) -> &'static dyn StoreBackend {
        self.backend
    }

    /// Whether `self` and `other` are schemes of one store (`az` and `abfss` are).
    pub fn same_store(self, other: ObjectScheme) -> bool {
        self.backend.name() == other.backend.name()
    }
}

impl PartialEq for ObjectScheme {
    fn eq(&self, other: &Self) -> bool {
        self.written == other.written
    }
}

impl Eq for ObjectScheme {}

impl std::hash::Hash for ObjectScheme {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.written.hash(state);
    }
}

impl std::fmt::Debug for ObjectScheme {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}://", self.written)
    }
}

/// An object on an object store: which store, which bucket, which key
/// ([`ObjectLocation::parse`] reads one).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ObjectLocation {
    /// The store.
    pub scheme: ObjectScheme,
    /// The bucket.
    pub bucket: String,
    /// The key (no leading `/`; empty for the bucket itself).
    pub key: String,
}

impl ObjectLocation {
    /// Another object of the same store and bucket.
    pub fn with_key(&self, key: impl Into<String>) -> ObjectLocation {
        ObjectLocation { scheme: self.scheme, bucket: self.bucket.clone(), key: key.into() }
    }

    /// `scheme://bucket/key`, with the canonical scheme.
    pub fn to_uri(&self) -> String {
        format!("{}://{}/{}", self.scheme.as_str(), self.bucket, self.key)
    }

    /// Whether `self` and `other` are on one store and bucket.
    pub fn same_bucket(&self, other: &ObjectLocation) -> bool {
        let backend = self.scheme.backend();
        self.scheme.same_store(other.scheme) && backend.container(&self.bucket) == backend.container(&other.bucket)
    }
}
