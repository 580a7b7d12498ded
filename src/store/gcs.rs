//! Google Cloud Storage (`gs://bucket/key`): object_store's GCS client (its JSON API; conditional
//! creates are `ifGenerationMatch=0`).
//!
//! Credentials and endpoint, key by key: the `gcs.*` properties of the table's catalog,
//! registered for its location ([`register`]; pyiceberg's and Java's names: `gcs.oauth2.token`, a
//! bearer token, and `gcs.service.host`, another endpoint such as an emulator's), then the
//! environment as object_store reads it (`GOOGLE_SERVICE_ACCOUNT` or
//! `GOOGLE_APPLICATION_CREDENTIALS`, a service account's JSON key file; `GOOGLE_SERVICE_ACCOUNT_KEY`,
//! the key itself; `GOOGLE_BASE_URL`; else application-default credentials, the metadata server
//! on GCE/GKE). An endpoint without credentials (an emulator) is used unsigned. DuckDB reads the
//! data through `httpfs`, with the host's own GCS secret (HMAC keys): GCS gives extensions no way
//! to derive one. Secrets never appear in `Debug` output or errors.

use std::collections::BTreeMap;
use std::sync::Arc;

use object_store::ObjectStore;
use object_store::gcp::{GcpCredential, GoogleCloudStorageBuilder};

use super::backend::{ObjectLocation, StoreBackend};
use super::redact::scrub;
use super::secret::{TableAccess, load_extension};
use crate::duck::Connection;
use crate::error::{Error, ErrorKind, Result};

/// The Google Cloud Storage store (`gs://bucket/key`).
pub struct GcsStore;

/// The GCS backend, as [`super::stores::STORES`] lists it.
pub static GCS: GcsStore = GcsStore;

impl StoreBackend for GcsStore {
    fn name(&self) -> &'static str {
        "GCS"
    }

    fn schemes(&self) -> &'static [(&'static str, &'static str)] {
        &[("gs", "gs")]
    }

    fn describes(&self) -> &'static str {
        "Google Cloud Storage (gs://)"
    }

    fn register_properties(&self, prefix: &str, properties: &BTreeMap<String, String>) {
        if let Some(settings) = GcsSettings::from_properties(properties) {
            register(prefix, settings);
        }
    }

    fn client(&self, object: &ObjectLocation) -> Result<Arc<dyn ObjectStore>> {
        client(object)
    }

    /// `httpfs` loaded; the data is read with the host's own GCS secret (HMAC keys: see the
    /// module doc).
    fn prepare_duckdb(&self, conn: &Connection, _prefix: &str) -> Result<TableAccess> {
        load_extension(conn, "httpfs")?;
        Ok(TableAccess::default())
    }
}

/// The `gcs.*` settings of a table's storage.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct GcsSettings {
    /// `gcs.oauth2.token`: a bearer token.
    pub token: Option<String>,
    /// `gcs.service.host`: the JSON API's base URL (an emulator's).
    pub service_host: Option<String>,
}

impl std::fmt::Debug for GcsSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GcsSettings")
            .field("token", &super::redact::presence(&self.token))
            .field("service_host", &self.service_host)
            .finish()
    }
}

impl GcsSettings {
    /// The settings among `properties` (`gcs.*`); `None` when there are none.
    pub fn from_properties<'a>(properties: impl IntoIterator<Item = (&'a String, &'a String)>) -> Option<Self> {
        let mut s = GcsSettings::default();
        let mut any = false;
        for (key, value) in properties {
            let value = Some(value.trim().to_string()).filter(|v| !v.is_empty());
            match key.as_str() {
                "gcs.oauth2.token" => s.token = value,
                "gcs.service.host" => s.service_host = value,
                _ => continue,
            }
            any = true;
        }
        any.then_some(s)
    }
}

/// Settings registered for table locations.
static REGISTRY: super::registry::PrefixRegistry<GcsSettings> = super::registry::PrefixRegistry::new();

/// Records the `gcs.*` settings for every location under `prefix` (a table's location,
/// canonical).
pub fn register(prefix: &str, settings: GcsSettings) {
    REGISTRY.register(prefix, settings);
}

/// Clients, one per bucket, settings and base URL.
type ClientKey = (String, Option<GcsSettings>, Option<String>);
static CLIENTS: super::registry::ClientCache<ClientKey, dyn ObjectStore> = super::registry::ClientCache::new();

/// The client of the bucket `object` is in.
fn client(object: &ObjectLocation) -> Result<Arc<dyn ObjectStore>> {
    let url = object.with_key("").to_uri().trim_end_matches('/').to_string();
    let settings = REGISTRY.lookup(&object.to_uri()).map(|(_, s)| s);
    let base_url = settings
        .as_ref()
        .and_then(|s| s.service_host.clone())
        .or_else(|| std::env::var("GOOGLE_BASE_URL").ok().filter(|v| !v.is_empty()));
    let key = (url.clone(), settings.clone(), base_url.clone());
    CLIENTS.get_or_build(key, || build(object, &url, settings.as_ref(), base_url.as_deref()))
}

fn build(
    object: &ObjectLocation,
    url: &str,
    settings: Option<&GcsSettings>,
    base_url: Option<&str>,
) -> Result<Arc<dyn ObjectStore>> {
    let mut builder = GoogleCloudStorageBuilder::from_env().with_url(url);
    let token = settings.and_then(|s| s.token.clone());
    if let Some(base) = base_url {
        builder = builder
            .with_base_url(base.trim_end_matches('/'))
            .with_client_options(object_store::ClientOptions::new().with_allow_http(base.starts_with("http://")));
        let has_credentials = token.is_some()
            || ["GOOGLE_SERVICE_ACCOUNT", "GOOGLE_SERVICE_ACCOUNT_PATH", "GOOGLE_SERVICE_ACCOUNT_KEY"]
                .iter()
                .any(|v| std::env::var_os(v).is_some());
        if !has_credentials {
            builder = builder.with_skip_signature(true);
        }
    }
    if let Some(bearer) = token {
        builder =
            builder.with_credentials(Arc::new(object_store::StaticCredentialProvider::new(GcpCredential { bearer })));
    }
    Ok(Arc::new(builder.build().map_err(|e| {
        Error::new(
            ErrorKind::InvalidArgument,
            format!("cannot reach Google Cloud Storage for '{}': {}", object.to_uri(), scrub(&e)),
        )
    })?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn settings_come_from_pyicebergs_properties_and_tokens_never_print() {
        let props: HashMap<String, String> =
            [("gcs.oauth2.token", "ya29.secret-token"), ("gcs.service.host", "http://127.0.0.1:4443")]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
        let s = GcsSettings::from_properties(&props).unwrap();
        assert_eq!(s.service_host.as_deref(), Some("http://127.0.0.1:4443"));
        let shown = format!("{s:?}");
        assert!(!shown.contains("ya29.secret-token"), "{shown}");
        assert!(GcsSettings::from_properties(&HashMap::new()).is_none());
    }
}
