//! A Delta table's system domains (`delta.*` domain metadata: `delta.rowTracking`,
//! `delta.clustering`), which delta-rs refuses to read; the kernel's internal reader does not.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use deltalake_core::DeltaTable;

use crate::error::{Error, ErrorKind, Result};

/// The domain of a clustered table's clustering columns.
pub const CLUSTERING: &str = "delta.clustering";

/// The configurations of the system domains `names` of `table` (at `root`) as of its version,
/// read in one pass over the log; a domain the log does not have (or removed) is absent.
pub fn system_domains(table: &DeltaTable, root: &Path, names: &[&str]) -> Result<HashMap<String, String>> {
    let fail = |e: &dyn std::fmt::Display| {
        Error::new(
            ErrorKind::CorruptMetadata,
            format!("Delta table '{}': cannot read its {} domains: {e}", root.display(), names.join(", ")),
        )
    };
    let state = table.snapshot().map_err(|e| fail(&e))?;
    let engine = table.log_store().engine(None);
    let url = super::log_store::table_url(root).ok_or_else(|| fail(&"no table URL"))?;
    let kernel = buoyant_kernel::Snapshot::builder_for(url)
        .at_version(state.version() as deltalake_core::kernel::Version)
        .build(engine.as_ref())
        .map_err(|e| fail(&e))?;
    let wanted: HashSet<&str> = names.iter().copied().collect();
    let found = kernel.get_domain_metadatas_internal(engine.as_ref(), Some(&wanted)).map_err(|e| fail(&e))?;
    Ok(found.into_iter().map(|(name, domain)| (name, domain.configuration().to_string())).collect())
}

/// The clustering columns in a `delta.clustering` configuration (`clusteringColumns`, each a path
/// of names as the files name them).
pub fn clustering_columns(configuration: &str, root: &Path) -> Result<Vec<Vec<String>>> {
    let config: serde_json::Value = serde_json::from_str(configuration).map_err(|e| {
        Error::new(
            ErrorKind::CorruptMetadata,
            format!("Delta table '{}': its {CLUSTERING} domain: {e}", root.display()),
        )
    })?;
    Ok(config
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
        .unwrap_or_default())
}
