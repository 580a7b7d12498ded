//! The files a UniForm table's Iceberg view still reads, which a Delta VACUUM must keep.
//!
//! Delta's converter (UniForm) writes Iceberg metadata into `<table>/metadata/` naming the same
//! data files as the Delta log, but only when a converting writer commits (Spark with
//! `delta-iceberg`, Databricks). After a commit by a writer that does not convert (delta-rs,
//! DuckDB, an OPTIMIZE of another tool), the Iceberg view lags the log: it still reads files the
//! log has removed, and a VACUUM that deletes them breaks every Iceberg reader until the next
//! conversion. Spark's VACUUM does not look; ours keeps every file any Iceberg metadata file in
//! `metadata/` references through any of its snapshots (data files and delete files, live
//! manifest entries), so the view stays readable however far behind it is.
//!
//! Every metadata file is read, not only the newest: which one the view's catalog (the Hive
//! metastore the converter registers it in) points at is not known here, and an older one is
//! what a reader pinned to it reads. A metadata file that cannot be read fails the vacuum before
//! anything is deleted: what it protects is unknown. A manifest list or manifest that no longer
//! exists (an Iceberg expiry removed it; old metadata files stay) protects nothing: no reader
//! can read that snapshot any more.

use std::collections::HashSet;

use crate::error::{Error, ErrorKind, Result};
use crate::table::delta::DeltaLakeTable;
use crate::table::iceberg::IcebergTable;
use crate::table::iceberg::reach::Reach;

/// The files (as `crate::store::canonical` spells them: local paths without `file:`, object
/// URIs) every snapshot of every Iceberg metadata file in the table's `metadata/` directory
/// references; empty when the table keeps no Iceberg metadata
/// ([`DeltaLakeTable::keeps_iceberg_metadata`]) or the directory holds none.
pub fn iceberg_view_files(table: &DeltaLakeTable) -> Result<HashSet<String>> {
    let mut out = HashSet::new();
    if !table.keeps_iceberg_metadata() {
        return Ok(out);
    }
    let root = table.root.to_string_lossy().trim_end_matches('/').to_string();
    for location in metadata_files(&format!("{root}/metadata"))? {
        let view = IcebergTable::load(&location).map_err(|e| unreadable(table, &location, &e))?;
        let snapshots: Vec<i64> = view.metadata.snapshots().map(|s| s.snapshot_id()).collect();
        let reach = Reach::load(&view, &snapshots, true).map_err(|e| unreadable(table, &location, &e))?;
        out.extend(reach.live_files().keys().map(|path| spelled(path)));
    }
    Ok(out)
}

/// The `*.metadata.json` files in `dir` (none when it does not exist).
fn metadata_files(dir: &str) -> Result<Vec<String>> {
    let names: Vec<String> = match crate::store::local_path(dir) {
        Some(local) => match std::fs::read_dir(local) {
            Ok(entries) => {
                entries.map(|e| Ok(e?.path().to_string_lossy().into_owned())).collect::<std::io::Result<_>>()?
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e.into()),
        },
        None => crate::runtime::block_on(crate::store::list(dir))??.into_iter().map(|o| o.location).collect(),
    };
    Ok(names.into_iter().filter(|n| n.ends_with(".metadata.json")).collect())
}

/// How `path` is compared with a VACUUM candidate: a local path without `file:` (and its
/// percent-encoding), an object URI in its canonical form.
pub fn spelled(path: &str) -> String {
    match crate::store::local_path(path) {
        Some(local) => crate::store::decoded(local),
        None => crate::store::decoded(&crate::store::canonical(path)),
    }
}

fn unreadable(table: &DeltaLakeTable, location: &str, e: &Error) -> Error {
    Error::new(
        ErrorKind::CorruptMetadata,
        format!(
            "Delta table '{}' keeps Iceberg metadata (UniForm), and its file '{location}' cannot be read, so the files \
             its Iceberg view reads are unknown; nothing was deleted: {e}",
            table.root.display()
        ),
    )
}
