//! The nested connection to the host database, and the only place SQL text is built.
//!
//! Data is written by DuckDB itself (`COPY … TO … (FORMAT parquet, RETURN_STATS)`) on a
//! connection to the same database the user loaded the extension into, so it obeys the
//! session's `threads` and `memory_limit`. Every identifier and literal that reaches SQL goes
//! through [`quote_ident`] or [`quote_literal`]; no raw user string is formatted into SQL.

use std::sync::{Arc, Mutex, MutexGuard};

use duckdb::Connection;

use crate::error::{Error, ErrorKind, Result};

/// A handle on the host database, shared by every registered function.
///
/// It holds one connection opened at `LOAD` time. New connections cannot be opened later: the
/// database handle DuckDB passes to the entrypoint is valid only while the extension loads, so
/// calls take turns on this one connection.
#[derive(Clone)]
pub struct HostDb {
    root: Arc<Mutex<Connection>>,
}

impl HostDb {
    /// Wraps the connection DuckDB handed to the extension's entrypoint.
    pub fn new(connection: Connection) -> Self {
        Self { root: Arc::new(Mutex::new(connection)) }
    }

    /// Exclusive use of the host connection until the guard drops.
    pub fn connect(&self) -> Result<MutexGuard<'_, Connection>> {
        self.root.lock().map_err(|_| Error::new(ErrorKind::DuckDb, "host connection lock poisoned"))
    }
}

/// `"name"` with embedded quotes doubled.
pub fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// `'text'` with embedded quotes doubled.
pub fn quote_literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_doubles_quotes() {
        assert_eq!(quote_ident("a\"b"), "\"a\"\"b\"");
        assert_eq!(quote_literal("it's"), "'it''s'");
        assert_eq!(quote_literal("x'); DROP TABLE t; --"), "'x''); DROP TABLE t; --'");
    }
}
