//! Temporary DuckDB secrets that live as long as our work needs them, not for the session.
//!
//! DuckDB's secrets belong to the database instance: a temporary secret created on our nested
//! connection is seen by the user's connections too, and it outranks any of theirs whose scope is
//! shorter. One left behind after a call would send the user's own reads and writes under the
//! table's prefix to the endpoint, with the keys, a catalog gave for the table. So ours are
//! leased ([`Connection::lease_secret`]): created under a name nobody else uses
//! (`__lakehouse_<stem>_<n>`), never replacing a secret, and dropped when the lease ends — at once
//! when the connection is free, else by whoever holds the connection, when they release it.
//!
//! Dropping never blocks (a lease may end on a thread that DuckDB needs to run the statement the
//! connection's holder waits for): the name is queued, then the connection is tried; a holder
//! drops the queued names before it releases the connection and tries again after, so a name
//! queued while the connection is held is dropped by its holder.

use std::sync::atomic::{AtomicU64, Ordering};

use super::{Connection, HostDb, after_release, quote_ident};
use crate::error::Result;

/// A temporary secret of ours, dropped when this lease is.
pub struct SecretLease {
    host: HostDb,
    name: String,
}

impl std::fmt::Debug for SecretLease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretLease").field("name", &self.name).finish()
    }
}

/// Names handed out, so that two leases never share one.
static LEASES: AtomicU64 = AtomicU64::new(0);

impl Connection<'_> {
    /// Creates the temporary secret `(options)` — DuckDB's `CREATE SECRET` options, which hold
    /// credentials — under a new name starting `__lakehouse_{stem}_`, for as long as the lease
    /// lives. The error names `what` the secret is for and never shows the statement.
    pub fn lease_secret(&self, stem: &str, what: &str, options: &str) -> Result<SecretLease> {
        let name = format!("__lakehouse_{stem}_{}", LEASES.fetch_add(1, Ordering::Relaxed));
        self.execute(&format!("CREATE TEMPORARY SECRET {} ({options})", quote_ident(&name))).map_err(|_| {
            crate::error::Error::new(
                crate::error::ErrorKind::DuckDb,
                format!("cannot create the temporary {what} on the host connection"),
            )
        })?;
        Ok(SecretLease { host: self.host().clone(), name })
    }
}

impl Drop for SecretLease {
    fn drop(&mut self) {
        let Ok(mut ended) = self.host.ended_leases.lock() else { return };
        ended.push(std::mem::take(&mut self.name));
        drop(ended);
        after_release(&self.host);
    }
}
