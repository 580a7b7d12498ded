//! Settings registered per table location, looked up by the longest registered prefix that
//! contains a location: what S3 ([`super::s3`]), Azure ([`super::azure`]) and GCS
//! ([`super::gcs`]) credentials apply to; and the cache of the clients built from them.
//! Prefixes and locations are written canonically ([`super::canonical`]) by the callers.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex};

use crate::error::{Error, ErrorKind, Result};

/// Settings of type `T` by location prefix.
pub struct PrefixRegistry<T>(Mutex<Vec<(String, T)>>);

impl<T: Clone> PrefixRegistry<T> {
    /// An empty registry.
    pub const fn new() -> Self {
        PrefixRegistry(Mutex::new(Vec::new()))
    }

    /// Records `settings` for every location under `prefix` (a table's location), replacing what
    /// an earlier call registered for the same prefix.
    pub fn register(&self, prefix: &str, settings: T) {
        let prefix = prefix.trim_end_matches('/').to_string();
        if let Ok(mut entries) = self.0.lock() {
            entries.retain(|(p, _)| *p != prefix);
            entries.push((prefix, settings));
        }
    }

    /// The longest registered prefix containing `location`, and its settings.
    pub fn lookup(&self, location: &str) -> Option<(String, T)> {
        let entries = self.0.lock().ok()?;
        entries
            .iter()
            .filter(|(prefix, _)| {
                location == prefix || location.strip_prefix(prefix.as_str()).is_some_and(|r| r.starts_with('/'))
            })
            .max_by_key(|(prefix, _)| prefix.len())
            .cloned()
    }
}

impl<T: Clone> Default for PrefixRegistry<T> {
    fn default() -> Self {
        Self::new()
    }
}

/// Object store clients, one per key (a bucket or container and its settings), built on first use.
pub struct ClientCache<K, C: ?Sized>(Mutex<Option<HashMap<K, Arc<C>>>>);

impl<K: Eq + Hash, C: ?Sized> ClientCache<K, C> {
    /// An empty cache.
    pub const fn new() -> Self {
        ClientCache(Mutex::new(None))
    }

    /// The client for `key`, built by `build` the first time.
    pub fn get_or_build(&self, key: K, build: impl FnOnce() -> Result<Arc<C>>) -> Result<Arc<C>> {
        let mut clients = self.0.lock().map_err(|_| Error::new(ErrorKind::Io, "object store clients poisoned"))?;
        let clients = clients.get_or_insert_with(HashMap::new);
        if let Some(client) = clients.get(&key) {
            return Ok(client.clone());
        }
        let client = build()?;
        clients.insert(key, client.clone());
        Ok(client)
    }
}

impl<K: Eq + Hash, C: ?Sized> Default for ClientCache<K, C> {
    fn default() -> Self {
        Self::new()
    }
}
