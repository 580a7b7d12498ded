//! Readying DuckDB for a table's data on object storage: its `httpfs` extension, and a temporary
//! secret with the credentials this extension resolved for the table, so that DuckDB reads and
//! writes the data with the same credentials as the metadata.

use crate::duck::{Nested, quote_literal};
use crate::error::{Error, ErrorKind, Result};

/// Readies the host connection for the data of a table on object storage (`location` is one of
/// its files): DuckDB's `httpfs` loaded, and — when this extension resolved credentials for the
/// table (a catalog's vended credentials or `s3.*` properties, [`super::registered`]) — a temporary
/// S3 secret scoped to the table's location, so DuckDB reads and writes the data with the same
/// credentials as the metadata. Without such credentials the host's own S3 secrets (or the AWS
/// environment httpfs reads) apply. A local location needs nothing.
pub fn prepare_remote(conn: &Nested, location: &str) -> Result<()> {
    if !super::is_remote(location) {
        return Ok(());
    }
    if conn.execute("LOAD httpfs").is_err() {
        conn.execute("INSTALL httpfs").and_then(|()| conn.execute("LOAD httpfs")).map_err(|e| {
            Error::new(
                ErrorKind::DuckDb,
                format!(
                    "the table is on object storage and DuckDB's httpfs extension could not be loaded ({}); \
                     install it (INSTALL httpfs) and try again",
                    e.message().lines().next().unwrap_or_default()
                ),
            )
        })?;
    }
    let Some((prefix, settings)) = super::registered(location) else { return Ok(()) };
    let (Some(key_id), Some(secret)) = (&settings.access_key_id, &settings.secret_access_key) else { return Ok(()) };
    let mut options = vec![
        "TYPE s3".to_string(),
        format!("KEY_ID {}", quote_literal(key_id)),
        format!("SECRET {}", quote_literal(secret)),
        format!("URL_STYLE {}", quote_literal(if settings.path_style() { "path" } else { "vhost" })),
        format!("SCOPE {}", quote_literal(&format!("{prefix}/"))),
    ];
    if let Some(token) = &settings.session_token {
        options.push(format!("SESSION_TOKEN {}", quote_literal(token)));
    }
    options.push(format!("REGION {}", quote_literal(settings.region.as_deref().unwrap_or("us-east-1"))));
    if let Some((host, tls)) = settings.endpoint_host() {
        options.push(format!("ENDPOINT {}", quote_literal(&host)));
        options.push(format!("USE_SSL {tls}"));
    }
    let name = format!("__lakehouse_{:016x}", {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        prefix.hash(&mut h);
        h.finish()
    });
    // The statement holds the secret: its error is replaced, never shown.
    conn.execute(&format!("CREATE OR REPLACE TEMPORARY SECRET {name} ({})", options.join(", "))).map_err(|_| {
        Error::new(
            ErrorKind::DuckDb,
            format!("cannot create the temporary S3 secret for '{prefix}' on the host connection"),
        )
    })
}
