//! Where delta-rs opens a Delta table: the table's root as the URL it takes, and the log store
//! it needs registered for an object store's scheme.

use std::path::Path;

/// The table's root as a directory URL: `file:///…/` on disk, `s3://bucket/prefix/` on S3.
pub fn table_url(root: &Path) -> Option<url::Url> {
    let text = root.to_string_lossy();
    if crate::store::local_path(&text).is_none() {
        return url::Url::parse(&format!("{}/", crate::store::canonical(&text).trim_end_matches('/'))).ok();
    }
    url::Url::from_directory_path(root).ok()
}

/// delta-rs opens a table only where a log store is registered for the URL's scheme: each
/// store's ([`crate::store::StoreBackend::delta_log_store`]; delta-rs's default log store, commits
/// by `PutMode::Create`, i.e. `If-None-Match: *`, on the object store given with the table), for
/// every scheme a table URL can have ([`table_url`] writes a remote root canonically).
pub(super) fn register_log_stores() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let registry = deltalake_core::logstore::logstore_factories();
        for (scheme, factory) in crate::store::delta_log_stores() {
            let url = url::Url::parse(&format!("{scheme}://")).expect("a scheme URL");
            if registry.get(&url).is_none() {
                registry.insert(url, factory);
            }
        }
    });
}
