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

use std::path::Path;

use crate::action::real_paths::RealPaths;
use crate::error::{Error, ErrorKind, Result};
use crate::table::delta::DeltaLakeTable;
use crate::table::iceberg::IcebergTable;
use crate::table::iceberg::reach::Reach;

/// The files (as the Iceberg metadata names them) every snapshot of every Iceberg metadata file
/// in the table's `metadata/` directory references; empty when the table keeps no Iceberg
/// metadata ([`DeltaLakeTable::keeps_iceberg_metadata`]) or the directory holds none. Compare
/// them with [`ViewFiles`].
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
        out.extend(reach.live_files().keys().map(|path| path.to_string()));
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
    // `.metadata.json.gz`: Java's legacy name for a compressed one (read like the others).
    Ok(names.into_iter().filter(|n| n.ends_with(".metadata.json") || n.ends_with(".metadata.json.gz")).collect())
}

/// The files of the view, in every spelling a listed file could match: as named, percent-decoded,
/// and on a local disk each of those with its directory's symlinks resolved (a view written
/// through another spelling of the table's directory, or Hive-escaped names such as
/// `ts=2024-01-01 00%3A00%3A00`, whose decoded form does not exist on disk). Matching too many
/// spellings only keeps more files.
pub struct ViewFiles {
    spellings: HashSet<String>,
}

impl ViewFiles {
    pub fn new(files: HashSet<String>) -> Self {
        let mut real = RealPaths::default();
        let mut spellings = HashSet::new();
        for file in files {
            let (raw, remote) = match crate::store::local_path(&file) {
                Some(local) => (local.to_string(), false),
                None => (crate::store::canonical(&file), true),
            };
            let decoded = crate::store::decoded(&raw);
            for form in [raw, decoded] {
                if !remote && let Some(resolved) = real.of(Path::new(&form)) {
                    let resolved = resolved.to_string_lossy().into_owned();
                    spellings.insert(crate::store::decoded(&resolved));
                    spellings.insert(resolved);
                }
                spellings.insert(form);
            }
        }
        ViewFiles { spellings }
    }

    pub fn is_empty(&self) -> bool {
        self.spellings.is_empty()
    }

    /// Whether the listed file `path` (a real local path, or an object URI) is one of the view's.
    pub fn holds(&self, path: &str) -> bool {
        self.spellings.contains(path) || self.spellings.contains(&crate::store::decoded(path))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The view names a file through a symlinked spelling of the table's directory, under a
    /// Hive-escaped directory name (`%3A` on disk), as written and percent-encoded once more as a
    /// URI would: each matches the file's real path as the listing gives it; another file does not.
    #[test]
    fn a_view_file_matches_its_real_path_however_the_view_spells_it() {
        let dir = std::env::temp_dir().join(format!("lakehouse-view-{}", uuid::Uuid::new_v4()));
        let real = dir.join("real").join("ts=2024-01-01 00%3A00");
        std::fs::create_dir_all(&real).unwrap();
        std::fs::write(real.join("f.parquet"), b"x").unwrap();
        std::os::unix::fs::symlink(dir.join("real"), dir.join("link")).unwrap();
        let listed = std::fs::canonicalize(real.join("f.parquet")).unwrap().to_string_lossy().into_owned();
        let link = dir.join("link").to_string_lossy().into_owned();
        for named in [
            format!("file:{link}/ts=2024-01-01 00%3A00/f.parquet"),
            format!("file:{link}/ts=2024-01-01%2000%253A00/f.parquet"),
            format!("{link}/ts=2024-01-01 00%3A00/f.parquet"),
        ] {
            let view = ViewFiles::new(HashSet::from([named.clone()]));
            assert!(view.holds(&listed), "{named} does not hold {listed}");
            assert!(!view.holds(&listed.replace("f.parquet", "g.parquet")), "{named}");
        }
        std::fs::remove_dir_all(dir).unwrap();
    }
}
