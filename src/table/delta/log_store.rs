//! Where delta-rs opens a Delta table: the table's root as the URL it takes, and the log store
//! it needs registered for an object store's scheme.

use std::path::Path;

/// The table's root as a directory URL: `file:///…/` on disk, `s3://bucket/prefix/` on S3.
pub fn table_url(root: &Path) -> Option<url::Url> {
    let text = root.to_string_lossy();
    if crate::store::is_remote(&text) {
        return url::Url::parse(&format!("{}/", crate::store::canonical(&text).trim_end_matches('/'))).ok();
    }
    url::Url::from_directory_path(root).ok()
}

/// delta-rs opens a table only where a log store is registered for the URL's scheme; `s3://` (and
/// Azure's and GCS's schemes) get its default log store (commits by `PutMode::Create`, i.e. `If-None-Match: *`), on the
/// object store given with the table ([`crate::store`]).
pub(super) fn register_s3_log_store() {
    use deltalake_core::logstore::{LogStoreFactory, StorageConfig, default_logstore, logstore_factories};
    struct S3LogStores;
    impl LogStoreFactory for S3LogStores {
        fn with_options(
            &self,
            prefixed_store: deltalake_core::logstore::ObjectStoreRef,
            root_store: deltalake_core::logstore::ObjectStoreRef,
            location: &url::Url,
            options: &StorageConfig,
        ) -> deltalake_core::DeltaResult<std::sync::Arc<dyn deltalake_core::logstore::LogStore>> {
            Ok(default_logstore(prefixed_store, root_store, location, options))
        }
    }
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let registry = logstore_factories();
        // Every scheme a table URL can have: [`table_url`] writes a remote root canonically.
        for scheme in crate::store::ObjectScheme::ALL {
            let url = url::Url::parse(&format!("{}://", scheme.as_str())).expect("a scheme URL");
            if registry.get(&url).is_none() {
                registry.insert(url, std::sync::Arc::new(S3LogStores));
            }
        }
    });
}
