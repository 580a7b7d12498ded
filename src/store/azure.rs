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
//! the same settings ([`AzureStore::prepare_duckdb`]). Secrets never appear in `Debug` output or errors.

use std::collections::BTreeMap;
use std::sync::Arc;

use object_store::ObjectStore;
use object_store::azure::MicrosoftAzureBuilder;

use super::backend::{ObjectLocation, StoreBackend};
use super::redact::scrub;
use super::secret::{TableAccess, load_extension, outranked, users_secret};
use crate::duck::secret_lease::SecretLease;
use crate::duck::{Connection, quote_literal};
use crate::error::{Error, ErrorKind, Result};

/// The Azure store, in each spelling (kept as written: a table's metadata names its files in one
/// spelling, and paths are compared as written): `az://container/key` (object_store's, DuckDB's),
/// `azure://container/key` (DuckDB's), and Hadoop's
/// `abfs[s]://container@account.dfs.core.windows.net/key` and
/// `wasb[s]://container@account.blob.core.windows.net/key`.
pub struct AzureStore;

/// The Azure backend, as [`super::stores::STORES`] lists it.
pub static AZURE: AzureStore = AzureStore;

impl StoreBackend for AzureStore {
    fn name(&self) -> &'static str {
        "Azure"
    }

    fn schemes(&self) -> &'static [(&'static str, &'static str)] {
        &[("az", "az"), ("azure", "azure"), ("abfs", "abfs"), ("abfss", "abfss"), ("wasb", "wasb"), ("wasbs", "wasbs")]
    }

    fn describes(&self) -> &'static str {
        "Azure (az://, abfss://, wasbs://)"
    }

    fn register_properties(&self, prefix: &str, properties: &BTreeMap<String, String>) {
        if let Some(settings) = AzureSettings::from_properties(properties) {
            register(prefix, settings);
        }
    }

    fn client(&self, object: &ObjectLocation) -> Result<Arc<dyn ObjectStore>> {
        client(object)
    }

    /// DuckDB's `azure` extension loaded; the table's registered `adls.*` settings as a secret
    /// scoped to its root, else a secret of the user's that covers it, else one from the
    /// environment object_store's client reads.
    fn prepare_duckdb(&self, conn: &Connection, prefix: &str) -> Result<TableAccess> {
        load_extension(conn, "azure")?;
        let theirs = users_secret(conn, prefix, "azure");
        match registered(prefix) {
            Some((_, settings)) => {
                let secret = registered_azure_secret(conn, prefix, &settings)?;
                let notice = theirs.filter(|_| secret.is_some()).map(|name| outranked(&name, prefix));
                Ok(TableAccess::new(secret, notice))
            }
            None if theirs.is_some() => Ok(TableAccess::default()),
            None => Ok(TableAccess::new(azure_secret(conn)?, None)),
        }
    }

    /// The container (`lake` of `lake@acct.dfs.core.windows.net`).
    fn container<'a>(&self, bucket: &'a str) -> &'a str {
        bucket.split('@').next().unwrap_or_default()
    }
}

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

/// Records the `adls.*` settings for every location under `prefix` (a table's location,
/// canonical).
pub fn register(prefix: &str, settings: AzureSettings) {
    REGISTRY.register(prefix, settings);
}

/// The longest registered prefix containing `location` (canonical), and its settings.
pub fn registered(location: &str) -> Option<(String, AzureSettings)> {
    REGISTRY.lookup(location)
}

/// Clients, one per container and settings.
static CLIENTS: super::registry::ClientCache<(String, Option<AzureSettings>), dyn ObjectStore> =
    super::registry::ClientCache::new();

/// The client of the container `object` is in.
fn client(object: &ObjectLocation) -> Result<Arc<dyn ObjectStore>> {
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

/// The Azure secret DuckDB reads the data with, from the environment object_store's client reads:
/// `AZURE_STORAGE_CONNECTION_STRING`, else account name and key (against Azurite with
/// `AZURE_STORAGE_USE_EMULATOR=true`, at `AZURITE_BLOB_STORAGE_URL` or its default), else the
/// credential chain for the account.
fn azure_secret(conn: &Connection) -> Result<Option<SecretLease>> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let emulator = var("AZURE_STORAGE_USE_EMULATOR").is_some_and(|v| v.eq_ignore_ascii_case("true"));
    let account = var("AZURE_STORAGE_ACCOUNT_NAME").or_else(|| emulator.then(|| "devstoreaccount1".to_string()));
    let key = var("AZURE_STORAGE_ACCOUNT_KEY").or_else(|| emulator.then(|| AZURITE_KEY.to_string()));
    let options = match (var("AZURE_STORAGE_CONNECTION_STRING"), &account, &key) {
        (Some(text), _, _) => format!("CONNECTION_STRING {}", quote_literal(&text)),
        (None, Some(account), Some(key)) => {
            let endpoint = if emulator {
                let base = var("AZURITE_BLOB_STORAGE_URL").unwrap_or_else(|| "http://127.0.0.1:10000".to_string());
                format!("BlobEndpoint={}/{account};", base.trim_end_matches('/'))
            } else {
                "EndpointSuffix=core.windows.net;".to_string()
            };
            let protocol = if emulator { "http" } else { "https" };
            let text = format!("DefaultEndpointsProtocol={protocol};AccountName={account};AccountKey={key};{endpoint}");
            format!("CONNECTION_STRING {}", quote_literal(&text))
        }
        (None, Some(account), None) => format!("PROVIDER credential_chain, ACCOUNT_NAME {}", quote_literal(account)),
        (None, None, _) => return Ok(None),
    };
    conn.lease_secret("azure", "Azure secret", &format!("TYPE azure, {options}")).map(Some)
}

/// The Azure secret DuckDB reads a table's data with when its catalog gave `adls.*` settings
/// ([`registered`]), scoped to the table's location.
fn registered_azure_secret(conn: &Connection, prefix: &str, settings: &AzureSettings) -> Result<Option<SecretLease>> {
    let account = settings.account_name.as_deref();
    let options = match (&settings.connection_string, account, &settings.account_key, &settings.sas_token) {
        (Some(text), _, _, _) => format!("CONNECTION_STRING {}", quote_literal(text)),
        (None, Some(account), Some(key), _) => {
            let text = format!(
                "DefaultEndpointsProtocol=https;AccountName={account};AccountKey={key};EndpointSuffix=core.windows.net;"
            );
            format!("CONNECTION_STRING {}", quote_literal(&text))
        }
        (None, Some(account), None, Some(sas)) => {
            let text = format!("BlobEndpoint=https://{account}.blob.core.windows.net;SharedAccessSignature={sas};");
            format!("CONNECTION_STRING {}", quote_literal(&text))
        }
        (None, Some(account), None, None) => {
            match (&settings.tenant_id, &settings.client_id, &settings.client_secret) {
                (Some(tenant), Some(id), Some(secret)) => format!(
                    "PROVIDER service_principal, TENANT_ID {}, CLIENT_ID {}, CLIENT_SECRET {}, ACCOUNT_NAME {}",
                    quote_literal(tenant),
                    quote_literal(id),
                    quote_literal(secret),
                    quote_literal(account)
                ),
                _ => format!("PROVIDER credential_chain, ACCOUNT_NAME {}", quote_literal(account)),
            }
        }
        (None, None, _, _) => return azure_secret(conn),
    };
    let scoped = format!("TYPE azure, {options}, SCOPE {}", quote_literal(&format!("{prefix}/")));
    conn.lease_secret("azure", &format!("Azure secret for '{prefix}'"), &scoped).map(Some)
}

/// Azurite's well-known development account key (public: Azurite's documentation).
const AZURITE_KEY: &str = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

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
