//! Orphan files: files under a table's location that no snapshot, manifest or metadata file
//! references, older than a safety window (younger files may belong to a write in flight).
//!
//! Referenced means named anywhere by the table's metadata: the current metadata file and every
//! metadata-log entry, `version-hint.text`, every snapshot's manifest list, every manifest those
//! lists name, every file any entry of those manifests names (whatever its status), and statistics
//! files. A subdirectory that is itself a table root (its own `metadata/*.metadata.json` or
//! `_delta_log/`) is never searched: nested tables are not ours to clean. Symlinks are neither
//! followed nor deleted. Hidden paths — a file or directory whose name starts with `.` or `_`,
//! at any depth — are never listed, as Java's `FileSystemWalker` does not (Hadoop's `.crc`
//! checksums, `_SUCCESS` markers, staging directories), except partition directories of a field
//! whose name starts with one of those characters (`_bucket=3`), and the temporary files our own
//! commits write (`.<uuid>.tmp`), which only an interrupted commit leaves behind.
//!
//! Two guards, as Java's `DeleteOrphanFiles` / Spark's `remove_orphan_files`:
//! - age: deleting files younger than [`MIN_OLDER_THAN_DAYS`] is refused unless the caller says
//!   `allow_young_orphans` (a write in flight has files no metadata names yet);
//! - prefix mismatch (`prefix_mismatch_mode=ERROR`): when a listed file is, on disk, a file the
//!   metadata names under another spelling (a symlinked location, another mount of the same
//!   directory), the metadata and the listing disagree on names and nothing is called an orphan:
//!   the call fails and deletes nothing.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::action::boundary::Boundary;
use crate::action::delete_files::{DeletedFile, delete_files};
use crate::action::real_paths::RealPaths;
use crate::error::{Error, ErrorKind, Result};
use crate::plan::expiry::{Deletion, FileKind};
use crate::store::normalize_location;
use crate::table::iceberg::IcebergTable;
use crate::table::iceberg::commit::relocate;
use crate::table::iceberg::reach::Reach;
use crate::table::{self, LocateOptions};

/// The reference safety window for in-flight writes (Iceberg's default).
pub const DEFAULT_OLDER_THAN_DAYS: f64 = 3.0;

/// Deleting orphans younger than this needs `allow_young_orphans` (Spark's 24-hour rule).
pub const MIN_OLDER_THAN_DAYS: f64 = 1.0;

/// An orphan file.
#[derive(Debug, Clone, PartialEq)]
pub struct Orphan {
    /// Its local path.
    pub path: String,
    /// Its size.
    pub size_bytes: u64,
    /// Last modification, milliseconds since the epoch.
    pub modified_ms: i64,
}

/// What every snapshot of `table` references; fails when any of it is missing, since orphans
/// cannot be told apart from files a lost manifest named.
pub fn load_all(table: &IcebergTable) -> Result<Reach> {
    let ids: Vec<i64> = table.metadata.snapshots().map(|s| s.snapshot_id()).collect();
    Reach::load(table, &ids, false)
}

/// Every file the table's metadata names, as normalized absolute local paths (`reach`:
/// [`load_all`]). A name that is not an absolute local path is refused: such a file could not be
/// recognized under the location, and would look like an orphan.
pub fn referenced_files(table: &IcebergTable, reach: &Reach) -> Result<HashSet<PathBuf>> {
    let names = reach.referenced_names(table, false);
    if crate::store::local_path(table.metadata.location()).is_none() {
        return Ok(names.into_iter().map(|name| PathBuf::from(crate::store::canonical(name))).collect());
    }
    names
        .into_iter()
        .map(|name| {
            normalize_location(name).filter(|p| p.is_absolute()).ok_or_else(|| {
                Error::new(
                    ErrorKind::Unsupported,
                    format!(
                        "cannot tell orphans apart: the metadata names '{name}', which is not an absolute local path"
                    ),
                )
            })
        })
        .collect()
}

/// Files under the location of `table` that nothing references and that were last modified
/// more than `older_than_days` ago, sorted by path (`reach`: [`load_all`]).
pub fn find_orphans(table: &IcebergTable, reach: &Reach, older_than_days: f64) -> Result<Vec<Orphan>> {
    if !older_than_days.is_finite() || older_than_days < 0.0 {
        return Err(Error::invalid(format!("older_than_days must be a number >= 0, got {older_than_days}")));
    }
    // The listing never leaves the table's root: a location the metadata sets elsewhere is not
    // listed at all.
    if let Some(why) = Boundary::of(table).refusal() {
        return Err(Error::new(ErrorKind::Unsupported, format!("{why}; nothing was listed")));
    }
    if crate::store::local_path(table.metadata.location()).is_none() {
        return find_orphans_remote(table, reach, older_than_days);
    }
    let root = normalize_location(table.metadata.location()).filter(|p| p.is_absolute()).ok_or_else(|| {
        Error::new(
            ErrorKind::Unsupported,
            format!("table location '{}' is not an absolute local path", table.metadata.location()),
        )
    })?;
    if !root.is_dir() {
        return Err(Error::new(ErrorKind::NotFound, format!("table location '{}' does not exist", root.display())));
    }
    let referenced = referenced_files(table, reach)?;
    let hidden = HiddenPaths::of(table);
    let mut canonical = RealPaths::default();
    let mut referenced_on_disk: Option<HashMap<PathBuf, &PathBuf>> = None;
    let hint = root.join("metadata").join("version-hint.text");
    let cutoff = Duration::try_from_secs_f64(older_than_days * 86_400.0)
        .ok()
        .and_then(|window| SystemTime::now().checked_sub(window))
        .unwrap_or(SystemTime::UNIX_EPOCH);
    let mut orphans = Vec::new();
    let mut stack = vec![root.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let entry = entry?;
            let path = entry.path();
            let meta = entry.metadata()?; // does not follow symlinks
            if hidden.is_hidden(&entry.file_name().to_string_lossy(), meta.is_dir()) {
                continue;
            }
            if meta.is_dir() {
                if !is_other_table_root(&path) {
                    stack.push(path);
                }
                continue;
            }
            if !meta.is_file() || path == hint || referenced.contains(&path) {
                continue;
            }
            let modified = meta.modified().unwrap_or(SystemTime::now());
            if modified >= cutoff {
                continue;
            }
            // Named by the metadata under another spelling of the same file?
            let on_disk = referenced_on_disk
                .get_or_insert_with(|| referenced.iter().filter_map(|p| Some((canonical.of(p)?, p))).collect());
            if let Some(named) = canonical.of(&path).and_then(|c| on_disk.get(&c)) {
                return Err(Error::new(
                    ErrorKind::Unsupported,
                    format!(
                        "prefix mismatch: '{}' under the table location is the file the metadata names as '{}' \
                         (a symlinked location or another mount); orphans cannot be told apart by name, so \
                         nothing was deleted: name the table by the location its metadata uses",
                        path.display(),
                        named.display()
                    ),
                ));
            }
            let modified_ms = modified.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
            orphans.push(Orphan { path: path.to_string_lossy().into_owned(), size_bytes: meta.len(), modified_ms });
        }
    }
    orphans.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(orphans)
}

/// [`find_orphans`] on object storage: one recursive listing of the table location, with the
/// listing's sizes and last-modified times; the same hidden names, version hint and nested
/// tables are skipped as on disk.
fn find_orphans_remote(table: &IcebergTable, reach: &Reach, older_than_days: f64) -> Result<Vec<Orphan>> {
    let root = crate::store::canonical(table.metadata.location()).trim_end_matches('/').to_string();
    let referenced = referenced_files(table, reach)?;
    let hidden = HiddenPaths::of(table);
    let objects = crate::runtime::block_on(crate::store::list(&root))??;
    let cutoff_ms = chrono::Utc::now().timestamp_millis() - (older_than_days * 86_400_000.0) as i64;
    // Directories under the root that are other tables (a `_delta_log/` or metadata files).
    let mut other_roots: HashSet<String> = HashSet::new();
    for o in &objects {
        let rel = &o.location[root.len()..];
        for marker in ["/_delta_log/", "/metadata/"] {
            if let Some(at) = rel.find(marker)
                && at > 0
                && (marker == "/_delta_log/"
                    || table::is_metadata_file_name(rel.rsplit('/').next().unwrap_or_default()))
            {
                other_roots.insert(format!("{root}{}/", &rel[..at]));
            }
        }
    }
    let hint = format!("{root}/metadata/version-hint.text");
    // Matched raw and percent-decoded (crate::store::decoded): only ever more files are kept.
    let referenced_decoded: HashSet<String> =
        referenced.iter().map(|p| crate::store::decoded(&p.to_string_lossy())).collect();
    let mut orphans = Vec::new();
    for o in objects {
        if !o.location.starts_with(&format!("{root}/")) || o.location == hint {
            continue;
        }
        let rel = &o.location[root.len() + 1..];
        let parts: Vec<&str> = rel.split('/').collect();
        let (dirs, name) = parts.split_at(parts.len() - 1);
        if dirs.iter().any(|d| hidden.is_hidden(d, true)) || hidden.is_hidden(name[0], false) {
            continue;
        }
        if other_roots.iter().any(|r| o.location.starts_with(r.as_str())) {
            continue;
        }
        if referenced.contains(&PathBuf::from(&o.location))
            || referenced_decoded.contains(&crate::store::decoded(&o.location))
            || o.modified_ms >= cutoff_ms
        {
            continue;
        }
        orphans.push(Orphan { path: o.location, size_bytes: o.size_bytes, modified_ms: o.modified_ms });
    }
    orphans.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(orphans)
}

/// Which names the listing skips ([`find_orphans`]): Java's `PartitionAwareHiddenPathFilter`.
struct HiddenPaths {
    /// `<field>=` of every partition field (of any spec) whose name looks hidden.
    partition_prefixes: Vec<String>,
}

impl HiddenPaths {
    fn of(table: &IcebergTable) -> Self {
        let partition_prefixes = table
            .metadata
            .partition_specs_iter()
            .flat_map(|spec| spec.fields().iter())
            .filter(|f| f.name.starts_with('_') || f.name.starts_with('.'))
            .map(|f| format!("{}=", f.name))
            .collect();
        Self { partition_prefixes }
    }

    fn is_hidden(&self, name: &str, is_dir: bool) -> bool {
        if !(name.starts_with('.') || name.starts_with('_')) {
            return false;
        }
        if is_dir {
            return !self.partition_prefixes.iter().any(|p| name.starts_with(p.as_str()));
        }
        !is_commit_temporary(name)
    }
}

/// `.<uuid>.tmp`: a metadata file our commit was writing when it was interrupted
/// ([`crate::table::iceberg::commit`]).
fn is_commit_temporary(name: &str) -> bool {
    name.strip_prefix('.').and_then(|n| n.strip_suffix(".tmp")).is_some_and(|id| uuid::Uuid::parse_str(id).is_ok())
}

fn is_other_table_root(dir: &Path) -> bool {
    if dir.join("_delta_log").is_dir() {
        return true;
    }
    let metadata = dir.join("metadata");
    metadata.is_dir()
        && std::fs::read_dir(&metadata).is_ok_and(|entries| {
            entries.flatten().any(|e| table::is_metadata_file_name(&e.file_name().to_string_lossy()))
        })
}

/// Locates `table_name`, finds its orphans and (unless `dry_run`) deletes them. Deleting files
/// younger than [`MIN_OLDER_THAN_DAYS`] needs `allow_young`.
pub fn remove_orphan_files(
    table_name: &str,
    locate: &LocateOptions,
    older_than_days: f64,
    allow_young: bool,
    dry_run: bool,
) -> Result<Vec<(Orphan, DeletedFile)>> {
    if !dry_run && !allow_young && older_than_days < MIN_OLDER_THAN_DAYS {
        return Err(Error::invalid(format!(
            "older_than_days {older_than_days} is below {MIN_OLDER_THAN_DAYS} day: files that young may belong to \
             a write in flight, and deleting them would corrupt it; pass allow_young_orphans := true if no \
             writer is running (a dry run lists them)"
        )));
    }
    let located = table::locate(table_name, locate)?;
    let table = IcebergTable::load(&located.metadata_location)?;
    let orphans = find_orphans(&table, &load_all(&table)?, older_than_days)?;
    let boundary = Boundary::of(&table);
    // A commit that landed while we listed may reference some of these files now.
    if !dry_run && relocate(&located)?.metadata_location != located.metadata_location {
        return Err(Error::new(
            ErrorKind::Catalog,
            "the table changed while its files were listed (or the metadata file named is not its newest); \
             nothing was deleted",
        ));
    }
    let deletions = orphans
        .iter()
        .map(|o| Deletion {
            kind: FileKind::OrphanFile,
            path: o.path.clone(),
            size_bytes: Some(o.size_bytes),
            snapshot_id: None,
            inside_location: boundary.admits(&o.path),
        })
        .collect();
    Ok(orphans.into_iter().zip(delete_files(deletions, dry_run, boundary.real_root())).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_names_are_skipped_as_java_skips_them() {
        let hidden = HiddenPaths { partition_prefixes: vec!["_bucket=".into()] };
        let cases = [
            ("part-0001.parquet", false, false),
            (".part-0001.parquet.crc", false, true),
            ("_SUCCESS", false, true),
            ("_staging", true, true),
            (".hive-staging", true, true),
            ("_bucket=3", true, false),
            ("_other=3", true, true),
            ("_bucket=3", false, true),
            ("data", true, false),
            (".7f2b9c1e-5d1a-4c8e-9a4b-2f6d8e1c3b5a.tmp", false, false),
            (".not-a-uuid.tmp", false, true),
        ];
        for (name, is_dir, want) in cases {
            assert_eq!(hidden.is_hidden(name, is_dir), want, "{name} (dir: {is_dir})");
        }
    }
}
