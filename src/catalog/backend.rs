//! What every catalog implements ([`Catalog`]) and how the registry knows it ([`Kind`]), and the
//! registration of a catalog's storage settings for a table's files: the part of `catalog` its
//! catalogs use, kept apart from the registry (`super`), which uses them.

use std::sync::Arc;

use futures::future::BoxFuture;

use super::config::CatalogConfig;
use super::pointer::{Move, Published, Swap};
use crate::error::{Error, ErrorKind, Result};

/// One catalog session: resolves a table's name to its current metadata file and publishes
/// commits. Its `Debug` output never shows a secret (it ends up in logs and error reports).
pub trait Catalog: Send + Sync + std::fmt::Debug {
    /// The catalog's name (for messages).
    fn name(&self) -> &str;

    /// The current metadata location of `namespace.table`, with the storage settings the catalog
    /// gives for the table's files registered ([`crate::store`]): the table, resolved by name.
    fn load(&self, namespace: &str, table: &str) -> Result<String>;

    /// The current metadata location again (after a conflict, or to settle an unknown outcome);
    /// by default [`Catalog::load`].
    fn reload(&self, namespace: &str, table: &str) -> Result<String> {
        self.load(namespace, table)
    }

    /// Whether the catalog takes a commit as changes under requirements and writes the new
    /// metadata file itself ([`Catalog::publish`], a REST catalog) rather than having its pointer
    /// moved to a metadata file we wrote ([`Catalog::swap`]). The metadata it commits may then
    /// differ from the one planned (it merges the changes into its own current metadata).
    fn takes_changes(&self) -> bool {
        false
    }

    /// Makes the pointer move `to` — the commit point of a catalog whose pointer we move. A call
    /// that was never answered is [`Swap::Unknown`], never an error.
    fn swap<'a>(&'a self, to: Move<'a>) -> BoxFuture<'a, Result<Swap>> {
        let _ = to;
        Box::pin(async move {
            Err(Error::new(ErrorKind::Catalog, format!("catalog '{}' moves its pointer itself", self.name())))
        })
    }

    /// Publishes `updates` (the REST spec's `TableUpdate`s) under `requirements` on
    /// `namespace.table`, when [`Catalog::takes_changes`].
    fn publish(
        &self,
        namespace: &str,
        table: &str,
        requirements: serde_json::Value,
        updates: serde_json::Value,
    ) -> Result<Published> {
        let _ = (namespace, table, requirements, updates);
        Err(Error::new(ErrorKind::Catalog, format!("catalog '{}' takes a new metadata file, not changes", self.name())))
    }
}

/// One catalog type of the registry.
pub struct Kind {
    /// The `type` property it answers to.
    pub name: &'static str,
    /// What it is, in the message that lists the supported types.
    pub describes: &'static str,
    /// Whether it is addressed by `uri` (else it is found without one, as Glue is).
    pub needs_uri: bool,
    /// Opens a session on the catalog a configuration describes.
    pub open: fn(&CatalogConfig) -> Result<Arc<dyn Catalog>>,
}

/// Registers a catalog's storage properties (`s3.*`, `client.*`, `adls.*`, `gcs.*`) for the files of the table whose
/// metadata is at `metadata_location`, when it is on object storage.
pub(crate) fn register_table_settings(
    metadata_location: &str,
    properties: &std::collections::BTreeMap<String, String>,
) {
    if crate::store::local_path(metadata_location).is_none()
        && let Some((dir, _)) = metadata_location.rsplit_once("/metadata/")
    {
        crate::store::register_properties(dir, properties);
    }
}
