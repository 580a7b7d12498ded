//! A Delta table's system domains (`delta.*` domain metadata: `delta.rowTracking`,
//! `delta.clustering`), which delta-rs refuses to read; the kernel's internal reader does not.

use std::path::Path;

use deltalake_core::DeltaTable;

use crate::error::{Error, ErrorKind, Result};

/// The configuration of the system domain `domain` of `table` (at `root`) as of its version;
/// `None` when the log has none (or it was removed).
pub fn system_domain(table: &DeltaTable, root: &Path, domain: &str) -> Result<Option<String>> {
    let fail = |e: &dyn std::fmt::Display| {
        Error::new(
            ErrorKind::CorruptMetadata,
            format!("Delta table '{}': cannot read its {domain} domain: {e}", root.display()),
        )
    };
    let state = table.snapshot().map_err(|e| fail(&e))?;
    let engine = table.log_store().engine(None);
    let url = super::table_url(root).ok_or_else(|| fail(&"no table URL"))?;
    let kernel = buoyant_kernel::Snapshot::builder_for(url)
        .at_version(state.version() as deltalake_core::kernel::Version)
        .build(engine.as_ref())
        .map_err(|e| fail(&e))?;
    kernel.get_domain_metadata_internal(domain, engine.as_ref()).map_err(|e| fail(&e))
}

/// The clustering columns of a clustered table (`delta.clustering`: `clusteringColumns`, each a
/// path of names as the files name them); `None` when it is not clustered.
pub fn clustering_columns(table: &DeltaTable, root: &Path) -> Result<Option<Vec<Vec<String>>>> {
    let Some(text) = system_domain(table, root, "delta.clustering")? else { return Ok(None) };
    let config: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        Error::new(
            ErrorKind::CorruptMetadata,
            format!("Delta table '{}': its delta.clustering domain: {e}", root.display()),
        )
    })?;
    let columns = config
        .get("clusteringColumns")
        .and_then(|c| c.as_array())
        .map(|columns| {
            columns
                .iter()
                .filter_map(|path| {
                    path.as_array().map(|p| p.iter().filter_map(|n| n.as_str().map(str::to_string)).collect())
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(Some(columns))
}
