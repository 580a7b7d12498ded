//! Catalogs: where a table's pointer lives. `namespace.table` is resolved through the catalog
//! configured as pyiceberg configures it ([`config`]): an Iceberg SQL catalog on sqlite
//! ([`sql`]), an Iceberg REST catalog ([`rest`]) or the AWS Glue Data Catalog ([`glue`], signed
//! by [`sigv4`]); registering the storage credentials the catalog
//! gives for the table's location (S3, Azure, GCS). A catalog URI may hold a password, so it never appears in an
//! error.

pub mod config;
pub mod glue;
pub mod pointer;
pub mod rest;
pub mod sigv4;
pub mod sql;

pub use config::CatalogOptions;
use config::{PyicebergConfig, split_identifier};
pub use pointer::Swap;

use std::path::PathBuf;

use crate::error::{Error, ErrorKind, Result};

/// A table found in a catalog.
#[derive(Debug, Clone, PartialEq)]
pub struct CatalogTable {
    /// The catalog's name.
    pub catalog: String,
    /// Namespace, dot-separated as the SQL catalog stores it.
    pub namespace: String,
    /// Table name.
    pub table: String,
    /// Current metadata location recorded in the catalog.
    pub metadata_location: String,
    /// Where the catalog keeps its pointer.
    pub backend: Backend,
}

/// The kind of catalog a table was found in.
#[derive(Debug, Clone, PartialEq)]
pub enum Backend {
    /// An Iceberg SQL catalog in this sqlite database file.
    Sql(PathBuf),
    /// An Iceberg REST catalog ([`crate::catalog::rest`]).
    Rest(std::sync::Arc<crate::catalog::rest::RestCatalog>),
    /// The AWS Glue Data Catalog ([`crate::catalog::glue`]).
    Glue(std::sync::Arc<crate::catalog::glue::GlueCatalog>),
}

/// Registers the storage properties (`s3.*`, `adls.*`, `gcs.*`) of the configured (named or default)
/// catalog for the table at `location`, when it is on object storage and the catalog has any: the
/// credentials of a table named by its path.
pub fn register_configured(location: &str, options: &CatalogOptions) -> Result<()> {
    if !crate::store::is_remote(location) {
        return Ok(());
    }
    let config = PyicebergConfig::from_environment()?;
    register_storage(location, &config.catalog(options).properties);
    Ok(())
}

/// Registers the storage settings among `properties` (`s3.*`/`client.*`, `adls.*`, `gcs.*`) for every
/// location under `prefix`.
fn register_storage(prefix: &str, properties: &std::collections::BTreeMap<String, String>) {
    if let Some(s3) = crate::store::S3Settings::from_properties(properties) {
        crate::store::register(prefix, s3);
    }
    if let Some(azure) = crate::store::azure::AzureSettings::from_properties(properties) {
        crate::store::azure::register(prefix, azure);
    }
    if let Some(gcs) = crate::store::gcs::GcsSettings::from_properties(properties) {
        crate::store::gcs::register(prefix, gcs);
    }
}

/// Registers a catalog's storage properties (`s3.*`, `client.*`, `adls.*`, `gcs.*`) for the files of the table whose
/// metadata is at `metadata_location`, when it is on object storage.
fn register_table_settings(metadata_location: &str, properties: &std::collections::BTreeMap<String, String>) {
    if crate::store::is_remote(metadata_location)
        && let Some((dir, _)) = metadata_location.rsplit_once("/metadata/")
    {
        register_storage(dir, properties);
    }
}

/// Resolves a catalog identifier to the table's current metadata location.
pub fn resolve(identifier: &str, options: &CatalogOptions) -> Result<CatalogTable> {
    let config = PyicebergConfig::from_environment()?;
    let (catalog_from_identifier, namespace, table) = split_identifier(identifier, &config, options)?;
    let options = CatalogOptions { name: options.name.clone().or(catalog_from_identifier), ..options.clone() };
    let catalog = config.catalog(&options);
    let kind = catalog.properties.get("type").map(|t| t.to_lowercase());
    if kind.as_deref() == Some("glue") {
        let glue = crate::catalog::glue::GlueCatalog::connect(&catalog)?;
        let found = crate::runtime::block_on(glue.get_table(&namespace, &table))??;
        register_table_settings(&found.metadata_location, &catalog.properties);
        return Ok(CatalogTable {
            catalog: catalog.name,
            namespace,
            table,
            metadata_location: found.metadata_location,
            backend: Backend::Glue(std::sync::Arc::new(glue)),
        });
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
    let is_rest = kind.as_deref() == Some("rest")
        || (kind.is_none() && (uri.starts_with("http://") || uri.starts_with("https://")));
    if is_rest {
        let rest = crate::catalog::rest::RestCatalog::connect(&catalog)?;
        let loaded = rest.load_table(&namespace, &table)?;
        loaded.register()?;
        return Ok(CatalogTable {
            catalog: catalog.name,
            namespace,
            table,
            metadata_location: loaded.metadata_location,
            backend: Backend::Rest(std::sync::Arc::new(rest)),
        });
    }
    if let Some(kind) = kind.filter(|t| t.as_str() != "sql") {
        return Err(Error::new(
            ErrorKind::Unsupported,
            format!(
                "catalog '{}' has type '{kind}'; Iceberg SQL catalogs (sqlite), REST catalogs and AWS Glue are supported",
                catalog.name
            ),
        ));
    }
    let database = sql::sqlite_path(uri).map_err(|e| e.with_context("catalog", catalog.name.clone()))?;
    let metadata_location = sql::lookup(&database, &catalog.name, &namespace, &table)?;
    register_table_settings(&metadata_location, &catalog.properties);
    Ok(CatalogTable { catalog: catalog.name, namespace, table, metadata_location, backend: Backend::Sql(database) })
}
