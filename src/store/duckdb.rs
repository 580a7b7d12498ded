//! Readying DuckDB for a table's data on object storage: its `httpfs` extension (S3, GCS) or
//! `azure` extension (Azure), and a temporary secret with the credentials this extension resolved for
//! the table, so that DuckDB reads and writes the data with the same credentials as the metadata.

use crate::duck::{Nested, quote_literal};
use crate::error::{Error, ErrorKind, Result};

/// Readies the host connection for the data of a table on object storage (`location` is one of
/// its files): DuckDB's `httpfs` loaded, and a temporary S3 secret scoped to the table's location
/// with the credentials the metadata is read with, so DuckDB reads and writes the data as they
/// do: the keys this extension registered for the table (a catalog's vended credentials or
/// `s3.*` properties, [`super::registered`]), else — for registered settings without keys, or
/// when `AWS_ACCESS_KEY_ID` is not set — the AWS credential chain's
/// ([`super::aws_credentials`]: a profile, assume-role, web identity, ECS, EC2), fetched again
/// before they expire each time a table is readied. When neither gives credentials the host's own
/// S3 secrets (or the AWS environment httpfs reads) apply. A local location needs nothing.
pub fn prepare_remote(conn: &Nested, location: &str) -> Result<()> {
    if !super::is_remote(location) {
        return Ok(());
    }
    let object = super::ObjectLocation::parse(location)?;
    if let super::ObjectScheme::Azure(_) = object.scheme {
        load_extension(conn, "azure")?;
        return match super::azure::registered(location) {
            Some((prefix, settings)) => registered_azure_secret(conn, &prefix, &settings),
            None => azure_secret(conn),
        };
    }
    load_extension(conn, "httpfs")?;
    if object.scheme == super::ObjectScheme::Gcs {
        // GCS's data is read with the host's own GCS secret (HMAC keys; see `super::gcs`).
        return Ok(());
    }
    let (prefix, settings) = match super::registered(location) {
        Some(found) => found,
        None if std::env::var_os("AWS_ACCESS_KEY_ID").is_none() => {
            (object.with_key("").to_uri().trim_end_matches('/').to_string(), super::S3Settings::from_environment())
        }
        None => return Ok(()),
    };
    let keys = match (&settings.access_key_id, &settings.secret_access_key) {
        (Some(key_id), Some(secret)) => {
            super::aws_credentials::AwsKeys::new(key_id, secret, settings.session_token.as_deref())
        }
        _ => match super::aws_credentials::resolve_blocking(settings.profile.as_deref(), &format!("'{prefix}'")) {
            Ok(keys) => keys,
            Err(_) => return Ok(()),
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
    let name = secret_name("__lakehouse", &prefix);
    // The statement holds the secret: its error is replaced, never shown.
    conn.execute(&format!("CREATE OR REPLACE TEMPORARY SECRET {name} ({})", options.join(", "))).map_err(|_| {
        Error::new(
            ErrorKind::DuckDb,
            format!("cannot create the temporary S3 secret for '{prefix}' on the host connection"),
        )
    })
}

/// The name of the temporary secret for the table at `prefix`: `stem` and a hash of the prefix.
fn secret_name(stem: &str, prefix: &str) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    prefix.hash(&mut h);
    format!("{stem}_{:016x}", h.finish())
}

/// Loads DuckDB's extension `name` on the connection (installing it first if need be).
fn load_extension(conn: &Nested, name: &str) -> Result<()> {
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
fn azure_secret(conn: &Nested) -> Result<()> {
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
        (None, None, _) => return Ok(()),
    };
    // The statement holds the secret: its error is replaced, never shown.
    conn.execute(&format!("CREATE OR REPLACE TEMPORARY SECRET __lakehouse_azure (TYPE azure, {options})"))
        .map_err(|_| Error::new(ErrorKind::DuckDb, "cannot create the temporary Azure secret on the host connection"))
}

/// The Azure secret DuckDB reads a table's data with when its catalog gave `adls.*` settings
/// ([`super::azure::registered`]), scoped to the table's location.
fn registered_azure_secret(conn: &Nested, prefix: &str, settings: &super::azure::AzureSettings) -> Result<()> {
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
    let name = secret_name("__lakehouse_azure", prefix);
    // The statement holds the secret: its error is replaced, never shown.
    conn.execute(&format!(
        "CREATE OR REPLACE TEMPORARY SECRET {name} (TYPE azure, {options}, SCOPE {})",
        quote_literal(&format!("{prefix}/"))
    ))
    .map_err(|_| {
        Error::new(
            ErrorKind::DuckDb,
            format!("cannot create the temporary Azure secret for '{prefix}' on the host connection"),
        )
    })
}

/// Azurite's well-known development account key (public: Azurite's documentation).
const AZURITE_KEY: &str = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";
