//! Catalogs: where a table's pointer lives. `namespace.table` is resolved through the catalog
//! configured as pyiceberg configures it ([`config`]): an Iceberg SQL catalog on sqlite
//! ([`sql`]), an Iceberg REST catalog ([`rest`], also S3 Tables' and Glue's Iceberg endpoints) or
//! the AWS Glue Data Catalog ([`glue`], signed by [`sigv4`]); registering the storage credentials
//! the catalog gives for the table's location (S3, Azure, GCS). A catalog URI may hold a
//! password, so it never appears in an error.
//!
//! Every catalog is one [`Catalog`] ([`backend`]: what each implements) behind an
//! `Arc<dyn Catalog>`, opened by [`open`] from the registry [`KINDS`], keyed by the configured
//! `type`. A new catalog is one file here — a type
//! implementing [`Catalog`] and its [`Kind`] — plus its `pub mod` line and its line in [`KINDS`].

pub mod backend;
pub mod config;
pub mod glue;
pub mod pointer;
pub mod rest;
pub mod sigv4;
pub mod sql;

pub(crate) use backend::register_table_settings;
pub use backend::{Catalog, Kind};
pub use config::CatalogOptions;
use config::{CatalogConfig, PyicebergConfig, split_identifier};
pub use pointer::{Move, Published, Swap};

use std::sync::Arc;

use crate::error::{Error, ErrorKind, Result};

/// The registry: every catalog type, by the `type` it answers to.
pub const KINDS: &[Kind] = &[sql::KIND, rest::KIND, glue::KIND];

/// The registry's entry for a configured catalog: its `type` (any case); without one, `rest`
/// when the `uri` is an http(s) URL, else `sql`. A type addressed by `uri` needs one.
pub fn kind_of(catalog: &CatalogConfig) -> Result<&'static Kind> {
    let find = |name: &str| KINDS.iter().find(|k| k.name == name);
    let kind = catalog.properties.get("type").map(|t| t.to_lowercase());
    if let Some(found) = kind.as_deref().and_then(find)
        && !found.needs_uri
    {
        return Ok(found);
    }
    let Some(uri) = catalog.properties.get("uri") else {
        return Err(Error::new(
            ErrorKind::Catalog,
            format!(
                "catalog '{}' is not configured: set catalog_uri := 'sqlite:///…', \
                 PYICEBERG_CATALOG__{}__URI, or an entry in ~/.pyiceberg.yaml",
                catalog.name,
                catalog.name.to_uppercase().replace('-', "_")
            ),
        ));
    };
    let kind = kind.unwrap_or_else(|| {
        if uri.starts_with("http://") || uri.starts_with("https://") { "rest" } else { "sql" }.to_string()
    });
    find(&kind).ok_or_else(|| {
        let described: Vec<&str> = KINDS.iter().map(|k| k.describes).collect();
        let supported = match described.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
            _ => described.join(""),
        };
        Error::new(
            ErrorKind::Unsupported,
            format!("catalog '{}' has type '{kind}'; {supported} are supported", catalog.name),
        )
    })
}

/// Opens a session on the configured catalog, of the type [`kind_of`] finds.
pub fn open(catalog: &CatalogConfig) -> Result<Arc<dyn Catalog>> {
    (kind_of(catalog)?.open)(catalog)
}

/// A table found in a catalog.
#[derive(Debug, Clone)]
pub struct CatalogTable {
    /// The catalog's name.
    pub catalog: String,
    /// Namespace, dot-separated as the SQL catalog stores it.
    pub namespace: String,
    /// Table name.
    pub table: String,
    /// Current metadata location recorded in the catalog.
    pub metadata_location: String,
    /// The catalog session that found it, which reloads and commits it.
    pub backend: Arc<dyn Catalog>,
}

/// Equal when they name the same table at the same metadata through the same catalog session.
impl PartialEq for CatalogTable {
    fn eq(&self, other: &Self) -> bool {
        self.catalog == other.catalog
            && self.namespace == other.namespace
            && self.table == other.table
            && self.metadata_location == other.metadata_location
            && std::ptr::addr_eq(Arc::as_ptr(&self.backend), Arc::as_ptr(&other.backend))
    }
}

impl CatalogTable {
    /// The table's current metadata location, read again from its catalog.
    pub fn reload(&self) -> Result<CatalogTable> {
        let metadata_location = self.backend.reload(&self.namespace, &self.table)?;
        Ok(CatalogTable { metadata_location, ..self.clone() })
    }
}
/// Registers the storage properties (`s3.*`, `adls.*`, `gcs.*`) of the configured (named or default)
/// catalog for the table at `location`, when it is on object storage and the catalog has any: the
/// credentials of a table named by its path.
pub fn register_configured(location: &str, options: &CatalogOptions) -> Result<()> {
    if crate::store::local_path(location).is_some() {
        return Ok(());
    }
    let config = PyicebergConfig::from_environment()?;
    crate::store::register_properties(location, &config.catalog(options).properties);
    Ok(())
}

/// Resolves a catalog identifier to the table's current metadata location.
pub fn resolve(identifier: &str, options: &CatalogOptions) -> Result<CatalogTable> {
    let config = PyicebergConfig::from_environment()?;
    let (catalog_from_identifier, namespace, table) = split_identifier(identifier, &config, options)?;
    let options = CatalogOptions { name: options.name.clone().or(catalog_from_identifier), ..options.clone() };
    let catalog = config.catalog(&options);
    let backend = open(&catalog)?;
    let metadata_location = backend.load(&namespace, &table)?;
    Ok(CatalogTable { catalog: catalog.name, namespace, table, metadata_location, backend })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(pairs: &[(&str, &str)]) -> CatalogConfig {
        CatalogConfig {
            name: "prod".into(),
            properties: pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        }
    }

    #[test]
    fn the_type_picks_the_catalog_and_a_uri_implies_one() {
        let kind = |pairs: &[(&str, &str)]| kind_of(&config(pairs)).map(|k| k.name);
        assert_eq!(kind(&[("uri", "sqlite:////tmp/c.db")]).unwrap(), "sql");
        assert_eq!(kind(&[("uri", "http://127.0.0.1:8181")]).unwrap(), "rest");
        assert_eq!(kind(&[("uri", "https://catalog.example")]).unwrap(), "rest");
        assert_eq!(kind(&[("type", "SQL"), ("uri", "sqlite:////tmp/c.db")]).unwrap(), "sql");
        assert_eq!(kind(&[("type", "Rest"), ("uri", "https://catalog.example")]).unwrap(), "rest");
        assert_eq!(kind(&[("type", "glue")]).unwrap(), "glue", "Glue needs no uri");
        for unconfigured in [&[][..], &[("type", "rest")][..], &[("type", "hive")][..]] {
            let err = kind(unconfigured).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Catalog, "{unconfigured:?}");
            assert!(err.to_string().contains("PYICEBERG_CATALOG__PROD__URI"), "{err}");
        }
        let err = kind(&[("type", "hive"), ("uri", "thrift://h:9083")]).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Unsupported);
        assert!(
            err.to_string().contains(
                "catalog 'prod' has type 'hive'; Iceberg SQL catalogs (sqlite), REST catalogs and AWS Glue are supported"
            ),
            "{err}"
        );
        let names: Vec<&str> = KINDS.iter().map(|k| k.name).collect();
        assert_eq!(names, ["sql", "rest", "glue"], "one registry entry per type");
    }

    #[test]
    fn catalog_sessions_never_show_a_secret() {
        let sql = open(&config(&[
            ("uri", "sqlite:////tmp/never-opened.db"),
            ("s3.secret-access-key", "sql-secret-value"),
            ("adls.connection-string", "AccountKey=c2VjcmV0"),
        ]))
        .unwrap();
        let table = CatalogTable {
            catalog: "prod".into(),
            namespace: "ns".into(),
            table: "t".into(),
            metadata_location: "/w/t/metadata/v1.metadata.json".into(),
            backend: sql.clone(),
        };
        let shown = format!("{sql:?} {table:?}");
        assert!(shown.contains("never-opened.db"), "{shown}");
        assert!(!shown.contains("sql-secret-value") && !shown.contains("c2VjcmV0"), "{shown}");
        assert_eq!(table, table.clone(), "a clone shares the session");

        let glue = open(&config(&[
            ("type", "glue"),
            ("glue.region", "us-east-1"),
            ("glue.endpoint", "http://127.0.0.1:1"),
            ("glue.access-key-id", "AKIDEXAMPLE"),
            ("glue.secret-access-key", "glue-secret-value"),
            ("glue.session-token", "glue-session-token"),
        ]))
        .unwrap();
        let shown = format!("{glue:?}");
        assert!(shown.contains("127.0.0.1:1"), "{shown}");
        assert!(!shown.contains("glue-secret-value") && !shown.contains("glue-session-token"), "{shown}");
        assert!(!glue.takes_changes() && !sql.takes_changes());
        assert_eq!(glue.name(), "prod");
    }
}
