//! What a store's backend uses to ready DuckDB for a table's data ([`super::backend::StoreBackend::prepare_duckdb`]):
//! DuckDB's extension for the store loaded, the user's own secret found, and the temporary secret
//! of ours held for the call ([`TableAccess`]).
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

/// What readying a table's remote data set up for the call: the temporary secret (dropped with
/// this value), and why it outranks a secret of the user's, when it does.
#[derive(Debug, Default)]
pub struct TableAccess {
    _secret: Option<SecretLease>,
    /// The user's secret that our secret outranks for the table's files during the call, said
    /// in words for the report's warning.
    pub notice: Option<String>,
}

impl TableAccess {
    /// Holds `secret` for the call; `notice` says which secret of the user's it outranks.
    pub fn new(secret: Option<SecretLease>, notice: Option<String>) -> TableAccess {
        TableAccess { _secret: secret, notice }
    }
}

/// The name of the user's secret of `kind` DuckDB would use for the files under `prefix`
/// (`which_secret`), when there is one (ours, `__lakehouse_…`, are not the user's).
pub fn users_secret(conn: &Connection, prefix: &str, kind: &str) -> Option<String> {
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
pub fn outranked(theirs: &str, prefix: &str) -> String {
    format!(
        "the table's files under '{prefix}/' were read and written with the credentials its catalog gives for it, \
         not with your DuckDB secret '{theirs}' (that secret applies again after this call)"
    )
}

/// Loads DuckDB's extension `name` on the connection (installing it first if need be).
pub fn load_extension(conn: &Connection, name: &str) -> Result<()> {
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
