//! Readying DuckDB for a table's data on object storage: its `httpfs` extension (S3, GCS) or
//! `azure` extension (Azure), and a temporary secret with the credentials this extension resolved for
//! the table, so that DuckDB reads and writes the data with the same credentials as the metadata.
//!
//! The secret is ours for the call only ([`TableAccess`] holds its lease; DuckDB's secrets are
//! the database's, seen by the user's connections too): scoped to exactly the table's root, so it
//! covers nothing else of the bucket, and dropped when the work that needs it is done, so the
//! user's own statements afterwards use the user's own secrets. A user's secret that covers the
//! table is used as it is unless the table has credentials of its own (a catalog's vended
//! credentials, the catalog configuration's `s3.*`); when those outrank it for the call, the
//! report's warning says so.

use crate::duck::secret_lease::SecretLease;
use crate::duck::{Connection, quote_literal};
use crate::error::{Error, ErrorKind, Result};

use super::TableRoot;

/// What readying a table's remote data set up for the call: the temporary secret (dropped with
/// this value), and why it outranks a secret of the user's, when it does.
#[derive(Debug, Default)]
pub struct TableAccess {
    _secret: Option<SecretLease>,
    /// The user's secret that our secret outranks for the table's files during the call, said
    /// in words for the report's warning.
    pub notice: Option<String>,
}

/// Readies the host connection for the data of the table at `root` when it is on object storage:
/// DuckDB's `httpfs` loaded, and a temporary S3 secret scoped to the root with the credentials
/// the metadata is read with, so DuckDB reads and writes the data as they do: the keys this
/// extension registered for the table (a catalog's vended credentials or `s3.*` properties,
/// [`super::registered`]), else — for registered settings without keys — the AWS credential
/// chain's ([`super::aws_credentials`]: a profile, assume-role, web identity, ECS, EC2), fetched
/// again before they expire each time a table is readied. Without registered settings, a secret
/// of the user's that covers the root is used; without one either, and without
/// `AWS_ACCESS_KEY_ID` (which httpfs reads itself), the credential chain's. A local table needs
/// nothing. Hold the returned value while DuckDB reads or writes the table's files.
pub fn prepare_remote(conn: &Connection, root: &TableRoot) -> Result<TableAccess> {
    let prefix = root.location();
    if !super::is_remote(&prefix) {
        return Ok(TableAccess::default());
    }
    let object = super::ObjectLocation::parse(&prefix)?;
    if let super::ObjectScheme::Azure(_) = object.scheme {
        load_extension(conn, "azure")?;
        let theirs = users_secret(conn, &prefix, "azure");
        return match super::azure::registered(&prefix) {
            Some((_, settings)) => {
                let secret = registered_azure_secret(conn, &prefix, &settings)?;
                let notice = theirs.filter(|_| secret.is_some()).map(|name| outranked(&name, &prefix));
                Ok(TableAccess { notice, _secret: secret })
            }
            None if theirs.is_some() => Ok(TableAccess::default()),
            None => Ok(TableAccess { _secret: azure_secret(conn)?, notice: None }),
        };
    }
    load_extension(conn, "httpfs")?;
    if object.scheme == super::ObjectScheme::Gcs {
        // GCS's data is read with the host's own GCS secret (HMAC keys; see `super::gcs`).
        return Ok(TableAccess::default());
    }
    let theirs = users_secret(conn, &prefix, "s3");
    let settings = match super::registered(&prefix) {
        Some((_, settings)) => settings,
        None if theirs.is_some() => return Ok(TableAccess::default()),
        None if std::env::var_os("AWS_ACCESS_KEY_ID").is_none() => super::S3Settings::from_environment(),
        None => return Ok(TableAccess::default()),
    };
    let keys = match (&settings.access_key_id, &settings.secret_access_key) {
        (Some(key_id), Some(secret)) => {
            super::aws_credentials::AwsKeys::new(key_id, secret, settings.session_token.as_deref())
        }
        _ => match super::aws_credentials::resolve_blocking(settings.profile.as_deref(), &format!("'{prefix}'")) {
            Ok(keys) => keys,
            Err(_) => return Ok(TableAccess::default()),
        },
    };
    let mut options = vec![
        "TYPE s3".to_string(),
        format!("KEY_ID {}", quote_literal(&keys.key_id)),
        format!("SECRET {}", quote_literal(&keys.secret)),
        format!("URL_STYLE {}", quote_literal(if settings.path_style() { "path" } else { "vhost" })),
        format!("SCOPE {}", quote_literal(&format!("{prefix}/"))),
    ];
    if let Some(token) = &keys.token {
        options.push(format!("SESSION_TOKEN {}", quote_literal(token)));
    }
    options.push(format!("REGION {}", quote_literal(settings.region.as_deref().unwrap_or("us-east-1"))));
    if let Some((host, tls)) = settings.endpoint_host() {
        options.push(format!("ENDPOINT {}", quote_literal(&host)));
        options.push(format!("USE_SSL {tls}"));
    }
    let secret = conn.lease_secret("s3", &format!("S3 secret for '{prefix}'"), &options.join(", "))?;
    Ok(TableAccess { notice: theirs.map(|name| outranked(&name, &prefix)), _secret: Some(secret) })
}

/// The name of the user's secret of `kind` DuckDB would use for the files under `prefix`
/// (`which_secret`), when there is one (ours, `__lakehouse_…`, are not the user's).
fn users_secret(conn: &Connection, prefix: &str, kind: &str) -> Option<String> {
    let rows = conn
        .query(&format!(
            "SELECT name FROM which_secret({}, {})",
            quote_literal(&format!("{prefix}/")),
            quote_literal(kind)
        ))
        .ok()?;
    let name = rows.rows.first()?.first()?.text()?.to_string();
    (!name.starts_with("__lakehouse_")).then_some(name)
}

/// The warning when our secret for `prefix` outranks the user's secret `theirs` for the call.
fn outranked(theirs: &str, prefix: &str) -> String {
    format!(
        "the table's files under '{prefix}/' were read and written with the credentials its catalog gives for it, \
         not with your DuckDB secret '{theirs}' (that secret applies again after this call)"
    )
}

/// Loads DuckDB's extension `name` on the connection (installing it first if need be).
fn load_extension(conn: &Connection, name: &str) -> Result<()> {
    if conn.execute(&format!("LOAD {name}")).is_ok() {
        return Ok(());
    }
    conn.execute(&format!("INSTALL {name}")).and_then(|()| conn.execute(&format!("LOAD {name}"))).map_err(|e| {
        Error::new(
            ErrorKind::DuckDb,
            format!(
                "the table is on object storage and DuckDB's {name} extension could not be loaded ({}); install it \
                 (INSTALL {name}) and try again",
                e.message().lines().next().unwrap_or_default()
            ),
        )
    })
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
/// ([`super::azure::registered`]), scoped to the table's location.
fn registered_azure_secret(
    conn: &Connection,
    prefix: &str,
    settings: &super::azure::AzureSettings,
) -> Result<Option<SecretLease>> {
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
