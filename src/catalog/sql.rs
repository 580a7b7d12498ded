//! The Iceberg SQL catalog on sqlite: the schema pyiceberg's `SqlCatalog` and Java's `JdbcCatalog`
//! share (`iceberg_tables(catalog_name, table_namespace, table_name, metadata_location, …)`),
//! read for a table's pointer and moved by a conditional update (the catalog is the lock).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use futures::future::BoxFuture;

use super::config::{CatalogConfig, RedactedProperties};
use super::{Catalog, Kind, Move, Swap};
use crate::error::{Error, ErrorKind, Result};

/// The registry's entry: `type: sql`, the default for a `uri` that is not an http(s) URL.
pub const KIND: Kind = Kind { name: "sql", describes: "Iceberg SQL catalogs (sqlite)", needs_uri: true, open };

fn open(config: &CatalogConfig) -> Result<Arc<dyn Catalog>> {
    Ok(Arc::new(SqlCatalog::connect(config)?))
}

/// An Iceberg SQL catalog in a sqlite database file.
pub struct SqlCatalog {
    name: String,
    database: PathBuf,
    /// The catalog's properties (`s3.*`, `adls.*`, `gcs.*` apply to its tables' files).
    properties: BTreeMap<String, String>,
}

/// Shows the database file and the properties, never a secret among them.
impl std::fmt::Debug for SqlCatalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqlCatalog")
            .field("name", &self.name)
            .field("database", &self.database)
            .field("properties", &RedactedProperties(&self.properties))
            .finish()
    }
}

impl SqlCatalog {
    /// The catalog `config` describes: the database file its `uri` names (nothing is opened yet).
    pub fn connect(config: &CatalogConfig) -> Result<Self> {
        let uri = config.properties.get("uri").map_or("", String::as_str);
        let database = sqlite_path(uri).map_err(|e| e.with_context("catalog", config.name.clone()))?;
        Ok(SqlCatalog { name: config.name.clone(), database, properties: config.properties.clone() })
    }
}

impl Catalog for SqlCatalog {
    fn name(&self) -> &str {
        &self.name
    }

    fn load(&self, namespace: &str, table: &str) -> Result<String> {
        let location = lookup(&self.database, &self.name, namespace, table)?;
        super::register_table_settings(&location, &self.properties);
        Ok(location)
    }

    fn reload(&self, namespace: &str, table: &str) -> Result<String> {
        lookup(&self.database, &self.name, namespace, table)
    }

    fn swap<'a>(&'a self, to: Move<'a>) -> BoxFuture<'a, Result<Swap>> {
        Box::pin(async move {
            let moved = swap_pointer(&self.database, &self.name, to.namespace, to.table, to.base, to.new_location)?;
            Ok(if moved { Swap::Moved } else { Swap::Conflict })
        })
    }
}

/// The database file of an SQLAlchemy sqlite URL (`sqlite:////abs.db`, `sqlite:///rel.db`).
pub fn sqlite_path(uri: &str) -> Result<PathBuf> {
    let scheme_end = uri.find("://").ok_or_else(|| Error::new(ErrorKind::Catalog, "catalog uri is not a URL"))?;
    let scheme = &uri[..scheme_end];
    if !(scheme == "sqlite" || scheme.starts_with("sqlite+")) {
        let shown = scheme.split('+').next().unwrap_or(scheme);
        return Err(Error::new(
            ErrorKind::Unsupported,
            format!("catalog uri scheme '{shown}' is not supported; this version reads sqlite SQL catalogs"),
        ));
    }
    let rest = &uri[scheme_end + 3..];
    let rest = rest.split('?').next().unwrap_or(rest);
    let path = rest.strip_prefix('/').unwrap_or(rest);
    if path.is_empty() || path == ":memory:" {
        return Err(Error::new(ErrorKind::Catalog, "an in-memory sqlite catalog holds no tables"));
    }
    Ok(PathBuf::from(path))
}

/// The current metadata location of `namespace.table` in the sqlite catalog at `database`.
///
/// Another writer (pyiceberg's `SqlCatalog`, Java's JDBC catalog) may be committing to the same
/// file: sqlite then answers a reader with `SQLITE_BUSY` while it holds its lock, and a read-only
/// connection that meets the writer's journal between its steps with `SQLITE_IOERR` ("disk I/O
/// error") or `SQLITE_CANTOPEN`. None of these says anything about the table, so the lookup waits
/// on the lock (`busy_timeout`) and is retried on them, for up to [`LOOKUP_PATIENCE`].
pub fn lookup(database: &PathBuf, catalog: &str, namespace: &str, table: &str) -> Result<String> {
    if !database.is_file() {
        return Err(Error::new(
            ErrorKind::NotFound,
            format!("catalog '{catalog}': database file '{}' does not exist", database.display()),
        ));
    }
    let started = std::time::Instant::now();
    let mut pause = std::time::Duration::from_millis(5);
    loop {
        match lookup_once(database, catalog, namespace, table) {
            Err(Lookup::Transient(_)) if started.elapsed() < LOOKUP_PATIENCE => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(std::time::Duration::from_millis(200));
            }
            Err(Lookup::Transient(e)) => {
                return Err(Error::new(ErrorKind::Catalog, format!("catalog '{catalog}': {e}")));
            }
            Err(Lookup::Failed(e)) => return Err(e),
            Ok(location) => return Ok(location),
        }
    }
}

/// How long a lookup keeps retrying while another writer holds or is releasing the database.
const LOOKUP_PATIENCE: std::time::Duration = std::time::Duration::from_secs(10);

/// Why one lookup attempt failed: a lock or journal of another writer in the way (retried), or
/// an answer about the catalog or the table (returned).
enum Lookup {
    Transient(rusqlite::Error),
    Failed(Error),
}

/// Whether `e` is another writer's lock or journal in the way rather than a fact about the catalog.
fn is_transient(e: &rusqlite::Error) -> bool {
    use rusqlite::ErrorCode::{CannotOpen, DatabaseBusy, DatabaseLocked, SystemIoFailure};
    matches!(e.sqlite_error_code(), Some(DatabaseBusy | DatabaseLocked | SystemIoFailure | CannotOpen))
}

/// One attempt of [`lookup`].
fn lookup_once(database: &PathBuf, catalog: &str, namespace: &str, table: &str) -> std::result::Result<String, Lookup> {
    let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let fail = |e: rusqlite::Error| {
        if is_transient(&e) {
            Lookup::Transient(e)
        } else {
            Lookup::Failed(Error::new(ErrorKind::Catalog, format!("catalog '{catalog}': {e}")))
        }
    };
    let conn = rusqlite::Connection::open_with_flags(database, flags).map_err(fail)?;
    conn.busy_timeout(std::time::Duration::from_secs(2)).map_err(fail)?;
    let mut stmt = conn
        .prepare(
            "SELECT metadata_location FROM iceberg_tables \
             WHERE catalog_name = ?1 AND table_namespace = ?2 AND table_name = ?3",
        )
        .map_err(|e| match e {
            rusqlite::Error::SqliteFailure(_, Some(ref m)) if m.contains("no such table") => {
                Lookup::Failed(Error::new(
                    ErrorKind::Catalog,
                    format!(
                        "catalog '{catalog}': the database has no iceberg_tables table; is it an Iceberg SQL catalog?"
                    ),
                ))
            }
            e => fail(e),
        })?;
    let mut rows = stmt.query([catalog, namespace, table]).map_err(fail)?;
    match rows.next().map_err(fail)? {
        Some(row) => {
            let location: Option<String> = row.get(0).map_err(fail)?;
            location.ok_or_else(|| {
                Lookup::Failed(Error::new(
                    ErrorKind::CorruptMetadata,
                    format!("table '{namespace}.{table}' has no metadata location"),
                ))
            })
        }
        None => Err(Lookup::Failed(Error::new(
            ErrorKind::NotFound,
            format!("table '{namespace}.{table}' not found in catalog '{catalog}'"),
        ))),
    }
}

/// Moves the pointer of `namespace.table` (of catalog `catalog` in the sqlite database
/// `database`) from `base` to `new_location`, only if it is still `base`: `false` when another
/// writer moved it first.
pub fn swap_pointer(
    database: &PathBuf,
    catalog: &str,
    namespace: &str,
    table: &str,
    base: &str,
    new_location: &str,
) -> Result<bool> {
    let catalog_err = |e: rusqlite::Error| Error::new(ErrorKind::Catalog, format!("catalog '{catalog}': {e}"));
    let conn = rusqlite::Connection::open_with_flags(database, rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE)
        .map_err(catalog_err)?;
    conn.busy_timeout(std::time::Duration::from_secs(10)).map_err(catalog_err)?;
    let changed = conn
        .execute(
            "UPDATE iceberg_tables SET metadata_location = ?1, previous_metadata_location = ?2 \
             WHERE catalog_name = ?3 AND table_namespace = ?4 AND table_name = ?5 AND metadata_location = ?2",
            [new_location, base, catalog, namespace, table],
        )
        .map_err(catalog_err)?;
    Ok(changed == 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_urls() {
        assert_eq!(sqlite_path("sqlite:////tmp/c.db").unwrap(), PathBuf::from("/tmp/c.db"));
        assert_eq!(sqlite_path("sqlite:///c.db").unwrap(), PathBuf::from("c.db"));
        assert_eq!(sqlite_path("sqlite+pysqlite:////tmp/c.db?x=1").unwrap(), PathBuf::from("/tmp/c.db"));
        assert!(sqlite_path("sqlite:///:memory:").is_err());
        let err = sqlite_path("postgresql+psycopg2://user:secret@host/db").unwrap_err();
        assert!(!err.to_string().contains("secret"), "{err}");
    }

    /// A writer committing as fast as it can (rollback journal, as pyiceberg's `SqlCatalog` leaves
    /// it) never makes a concurrent lookup fail, and every answer is one the writer committed.
    #[test]
    fn lookups_beside_a_committing_writer_never_fail() {
        let dir = std::env::temp_dir().join(format!("lakehouse-sql-lookup-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let database = dir.join("catalog.db");
        let _ = std::fs::remove_file(&database);
        let writer = rusqlite::Connection::open(&database).unwrap();
        writer
            .execute_batch(
                "CREATE TABLE iceberg_tables (catalog_name TEXT, table_namespace TEXT, table_name TEXT, \
                 metadata_location TEXT, previous_metadata_location TEXT); \
                 INSERT INTO iceberg_tables VALUES ('c', 'ns', 't', 'm-0', NULL);",
            )
            .unwrap();
        drop(writer);
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writing = {
            let (stop, database) = (stop.clone(), database.clone());
            std::thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let (base, next) = (format!("m-{n}"), format!("m-{}", n + 1));
                    assert!(swap_pointer(&database, "c", "ns", "t", &base, &next).unwrap());
                    n += 1;
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                n
            })
        };
        for _ in 0..200 {
            let location = lookup(&database, "c", "ns", "t").unwrap();
            assert!(location.starts_with("m-"), "{location}");
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        assert!(writing.join().unwrap() > 0);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
