//! Azure Blob Storage and ADLS Gen2: object_store's Azure client, the container and account from
//! the location (`abfss://container@account.dfs.core.windows.net/…`, `az://container/…`).
//!
//! Credentials, key by key: the `adls.*` properties of the table's catalog, registered for its
//! location ([`register`]; pyiceberg's names: `adls.connection-string`, `adls.account-name`,
//! `adls.account-key`, `adls.sas-token`, `adls.tenant-id`/`adls.client-id`/`adls.client-secret`
//! for a service principal), then the environment as object_store reads it
//! (`AZURE_STORAGE_ACCOUNT_NAME`, `AZURE_STORAGE_ACCOUNT_KEY`, `AZURE_STORAGE_SAS_TOKEN`,
//! `AZURE_CLIENT_ID`/`AZURE_CLIENT_SECRET`/`AZURE_TENANT_ID`, managed identity;
//! `AZURE_STORAGE_USE_EMULATOR=true` for Azurite). DuckDB reads the data with a secret made from
//! the same settings ([`super::duckdb`]). Secrets never appear in `Debug` output or errors.

use std::sync::Arc;

use object_store::ObjectStore;
use object_store::azure::MicrosoftAzureBuilder;

use super::location::ObjectLocation;
use super::redact::scrub;
use crate::error::{Error, ErrorKind, Result};

/// The `adls.*` settings of a table's storage.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct AzureSettings {
    /// `adls.connection-string`, as given (DuckDB's secret takes it whole).
    pub connection_string: Option<String>,
    /// `adls.account-name` (or the connection string's `AccountName`).
    pub account_name: Option<String>,
    /// `adls.account-key` (or `AccountKey`).
    pub account_key: Option<String>,
    /// `adls.sas-token` (or `SharedAccessSignature`), without a leading `?`.
    pub sas_token: Option<String>,
    /// The connection string's `BlobEndpoint` (an emulator's, a sovereign cloud's).
    pub blob_endpoint: Option<String>,
    /// `adls.tenant-id`, `adls.client-id`, `adls.client-secret`: a service principal.
    pub tenant_id: Option<String>,
    /// See `tenant_id`.
    pub client_id: Option<String>,
    /// See `tenant_id`.
    pub client_secret: Option<String>,
}

impl std::fmt::Debug for AzureSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use super::redact::presence as shown;
        f.debug_struct("AzureSettings")
            .field("connection_string", &shown(&self.connection_string))
            .field("account_name", &self.account_name)
            .field("account_key", &shown(&self.account_key))
            .field("sas_token", &shown(&self.sas_token))
            .field("blob_endpoint", &self.blob_endpoint)
            .field("tenant_id", &self.tenant_id)
            .field("client_id", &self.client_id)
            .field("client_secret", &shown(&self.client_secret))
            .finish()
    }
}

impl AzureSettings {
    /// The settings among `properties` (`adls.*`); `None` when there are none.
    pub fn from_properties<'a>(properties: impl IntoIterator<Item = (&'a String, &'a String)>) -> Option<Self> {
        let mut s = AzureSettings::default();
        let mut any = false;
        for (key, value) in properties {
            let value = Some(value.trim().to_string()).filter(|v| !v.is_empty());
            match key.as_str() {
                "adls.connection-string" => s.connection_string = value,
                "adls.account-name" => s.account_name = value,
                "adls.account-key" => s.account_key = value,
                "adls.sas-token" => s.sas_token = value.map(|v| v.trim_start_matches('?').to_string()),
                "adls.tenant-id" => s.tenant_id = value,
                "adls.client-id" => s.client_id = value,
                "adls.client-secret" => s.client_secret = value,
                _ => continue,
            }
            any = true;
        }
        if let Some(text) = s.connection_string.clone() {
            for part in text.split(';') {
                let Some((key, value)) = part.split_once('=') else { continue };
                let value = Some(value.trim().to_string());
                match key.trim() {
                    "AccountName" => s.account_name = s.account_name.take().or(value),
                    "AccountKey" => s.account_key = s.account_key.take().or(value),
                    "SharedAccessSignature" => s.sas_token = s.sas_token.take().or(value),
                    "BlobEndpoint" => s.blob_endpoint = value,
                    _ => {}
                }
            }
        }
        any.then_some(s)
    }
}

/// Settings registered for table locations.
static REGISTRY: super::registry::PrefixRegistry<AzureSettings> = super::registry::PrefixRegistry::new();

/// Records the `adls.*` settings for every location under `prefix` (a table's location).
pub fn register(prefix: &str, settings: AzureSettings) {
    REGISTRY.register(prefix, settings);
}

/// The longest registered prefix containing `location`, and its settings.
pub fn registered(location: &str) -> Option<(String, AzureSettings)> {
    REGISTRY.lookup(location)
}

/// Clients, one per container and settings.
static CLIENTS: super::registry::ClientCache<(String, Option<AzureSettings>), dyn ObjectStore> =
    super::registry::ClientCache::new();

/// The client of the container `object` is in.
pub fn client(object: &ObjectLocation) -> Result<Arc<dyn ObjectStore>> {
    let url = object.with_key("").to_uri().trim_end_matches('/').to_string();
    let settings = registered(&object.to_uri()).map(|(_, s)| s);
    CLIENTS.get_or_build((url.clone(), settings.clone()), || build(object, &url, settings.as_ref()))
}

fn build(object: &ObjectLocation, url: &str, settings: Option<&AzureSettings>) -> Result<Arc<dyn ObjectStore>> {
    let mut builder = MicrosoftAzureBuilder::from_env().with_url(url);
    if let Some(s) = settings {
        if let Some(account) = &s.account_name {
            builder = builder.with_account(account);
        }
        if let Some(endpoint) = &s.blob_endpoint {
            builder = builder
                .with_use_emulator(false)
                .with_endpoint(endpoint.trim_end_matches('/').to_string())
                .with_allow_http(endpoint.starts_with("http://"));
        }
        if let Some(key) = &s.account_key {
            builder = builder.with_access_key(key);
        } else if let Some(sas) = &s.sas_token {
            let pairs = url::form_urlencoded::parse(sas.as_bytes()).into_owned().collect::<Vec<(String, String)>>();
            builder = builder.with_sas_authorization(pairs);
        } else if let (Some(tenant), Some(id), Some(secret)) = (&s.tenant_id, &s.client_id, &s.client_secret) {
            builder = builder.with_client_secret_authorization(id, secret, tenant);
        }
    }
    Ok(Arc::new(builder.build().map_err(|e| {
        Error::new(
            ErrorKind::InvalidArgument,
            format!("cannot reach Azure storage for '{}': {}", object.to_uri(), scrub(&e)),
        )
    })?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn connection_strings_fill_the_settings_and_never_print() {
        let props: HashMap<String, String> = [(
            "adls.connection-string",
            "DefaultEndpointsProtocol=http;AccountName=acct;AccountKey=c2VjcmV0S0VZ;BlobEndpoint=http://127.0.0.1:10000/acct;",
        )]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let s = AzureSettings::from_properties(&props).unwrap();
        assert_eq!(s.account_name.as_deref(), Some("acct"));
        assert_eq!(s.account_key.as_deref(), Some("c2VjcmV0S0VZ"));
        assert_eq!(s.blob_endpoint.as_deref(), Some("http://127.0.0.1:10000/acct"));
        let shown = format!("{s:?}");
        assert!(!shown.contains("c2VjcmV0S0VZ"), "{shown}");
        assert!(AzureSettings::from_properties(&HashMap::new()).is_none());
    }
}
