//! Committing a new metadata file atomically, with optimistic concurrency.
//!
//! A commit writes the new `*.metadata.json` next to the current one under a name that does not
//! exist yet (a hard link of a fully written temporary file, so no reader ever sees half a file
//! and two writers cannot claim the same version), then moves the table's pointer:
//! the SQL catalog's `metadata_location` with a conditional `UPDATE … WHERE metadata_location =
//! <base>`, or `metadata/version-hint.text` for a path table. If the pointer moved since the base
//! was read the commit reports [`CommitOutcome::Conflict`] and removes its metadata file.

use std::path::{Path, PathBuf};

use iceberg::spec::TableMetadata;

use super::catalog::CatalogTable;
use super::{Located, metadata_version, strip_file_scheme};
use crate::error::{Error, ErrorKind, Result};

/// How a commit ended.
#[derive(Debug, Clone, PartialEq)]
pub enum CommitOutcome {
    /// The table now points at this metadata file.
    Committed(String),
    /// Someone else committed first; nothing of ours is left behind.
    Conflict,
}

/// Where the metadata file after `base_location` goes: `v{N+1}.metadata.json` or
/// `{N+1:05}-{uuid}.metadata.json`, following the base's naming.
pub fn next_metadata_location(base_location: &str) -> String {
    let (dir, name) = base_location.rsplit_once('/').unwrap_or((".", base_location));
    let next = match metadata_version(name) {
        Some(v) if name.starts_with('v') => format!("v{}.metadata.json", v + 1),
        Some(v) => format!("{:05}-{}.metadata.json", v + 1, uuid::Uuid::new_v4()),
        None => format!("{}.metadata.json", uuid::Uuid::new_v4()),
    };
    format!("{dir}/{next}")
}

/// Whether a commit on `located` excludes every other writer: a catalog entry (conditional
/// update), `metadata/version-hint.text` (checked and moved), or `vN.metadata.json` names (the
/// next version is created exclusively). A path table with `<N>-<uuid>.metadata.json` names and
/// no hint is none of these: another writer can commit beside us, or a catalog we do not know of
/// may keep pointing at its own file. Adding files then is harmless; deleting them is not.
pub fn is_exclusive(located: &Located) -> bool {
    if located.catalog_table.is_some() {
        return true;
    }
    let base = Path::new(strip_file_scheme(&located.metadata_location));
    let hint = base.parent().map(|d| d.join("version-hint.text"));
    let v_named =
        base.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with('v') && metadata_version(n).is_some());
    hint.is_some_and(|h| h.is_file()) || v_named
}

/// Writes `bytes` to `target` only if `target` does not exist yet.
fn write_new_file(target: &Path, bytes: &[u8]) -> Result<bool> {
    let tmp = target.with_file_name(format!(".{}.tmp", uuid::Uuid::new_v4()));
    std::fs::write(&tmp, bytes)?;
    let linked = std::fs::hard_link(&tmp, target);
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Replaces `target` with `bytes` atomically (a temporary file renamed over it).
pub fn replace_file(target: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = target.with_file_name(format!(".{}.tmp", uuid::Uuid::new_v4()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, target)?;
    Ok(())
}

/// Commits `metadata` as the successor of `located` (whose metadata the change was based on).
pub fn commit(located: &Located, metadata: &TableMetadata) -> Result<CommitOutcome> {
    let base = &located.metadata_location;
    let new_location = next_metadata_location(base);
    let new_path = PathBuf::from(strip_file_scheme(&new_location));
    let json = serde_json::to_vec_pretty(metadata)
        .map_err(|e| Error::new(ErrorKind::CorruptMetadata, format!("cannot serialize metadata: {e}")))?;
    if !write_new_file(&new_path, &json)? {
        return Ok(CommitOutcome::Conflict);
    }
    let swapped = match &located.catalog_table {
        Some(table) => swap_catalog_pointer(table, base, &new_location),
        None => swap_version_hint(base, &new_path),
    };
    match swapped {
        Ok(true) => Ok(CommitOutcome::Committed(new_location)),
        Ok(false) => {
            let _ = std::fs::remove_file(&new_path);
            Ok(CommitOutcome::Conflict)
        }
        Err(e) => {
            let _ = std::fs::remove_file(&new_path);
            Err(e)
        }
    }
}

fn swap_catalog_pointer(table: &CatalogTable, base: &str, new_location: &str) -> Result<bool> {
    let catalog_err = |e: rusqlite::Error| Error::new(ErrorKind::Catalog, format!("catalog '{}': {e}", table.catalog));
    let conn = rusqlite::Connection::open_with_flags(&table.database, rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE)
        .map_err(catalog_err)?;
    conn.busy_timeout(std::time::Duration::from_secs(10)).map_err(catalog_err)?;
    let changed = conn
        .execute(
            "UPDATE iceberg_tables SET metadata_location = ?1, previous_metadata_location = ?2 \
             WHERE catalog_name = ?3 AND table_namespace = ?4 AND table_name = ?5 AND metadata_location = ?2",
            [new_location, base, &table.catalog, &table.namespace, &table.table],
        )
        .map_err(catalog_err)?;
    Ok(changed == 1)
}

/// A path table: if `metadata/version-hint.text` exists it must still point at the base; it is
/// then moved to the new file. Without a hint the new file's higher version makes it the newest.
fn swap_version_hint(base: &str, new_path: &Path) -> Result<bool> {
    let base_path = PathBuf::from(strip_file_scheme(base));
    let Some(dir) = base_path.parent() else { return Ok(true) };
    let hint = dir.join("version-hint.text");
    if !hint.is_file() {
        return Ok(true);
    }
    let current = super::metadata_file_from_hint(dir, &std::fs::read_to_string(&hint)?)?;
    if current.file_name() != base_path.file_name() {
        return Ok(false);
    }
    let name = new_path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    let text = match metadata_version(name) {
        Some(v) if name.starts_with('v') => v.to_string(),
        _ => name.to_string(),
    };
    replace_file(&hint, text.as_bytes())?;
    Ok(true)
}

/// Where the table's current metadata is now (the catalog's pointer, or the version hint).
pub fn relocate(located: &Located) -> Result<Located> {
    match &located.catalog_table {
        Some(t) => {
            let fresh = super::catalog::lookup(&t.database, &t.catalog, &t.namespace, &t.table)?;
            Ok(Located {
                metadata_location: fresh.clone(),
                catalog_table: Some(super::catalog::CatalogTable { metadata_location: fresh, ..t.clone() }),
            })
        }
        None => {
            let base = Path::new(strip_file_scheme(&located.metadata_location));
            let dir = base
                .parent()
                .and_then(Path::parent)
                .ok_or_else(|| Error::invalid("metadata file has no table directory"))?;
            // The hint when there is one, else the newest metadata file (`locate` prefers the hint).
            super::locate(&dir.to_string_lossy(), &super::LocateOptions { latest_metadata: true, ..Default::default() })
        }
    }
}

/// Test hook: `LAKEHOUSE_TEST_PAUSE_BEFORE_COMMIT_MS` holds the commit back so an integration test
/// can commit a concurrent change in between (compaction and expiry call it once, before
/// their first commit attempt). Unset in normal use.
pub fn pause_for_tests() {
    if let Some(ms) = std::env::var("LAKEHOUSE_TEST_PAUSE_BEFORE_COMMIT_MS").ok().and_then(|v| v.parse::<u64>().ok()) {
        std::thread::sleep(std::time::Duration::from_millis(ms.min(60_000)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_locations_follow_the_base_naming() {
        assert_eq!(next_metadata_location("/t/metadata/v7.metadata.json"), "/t/metadata/v8.metadata.json");
        let next = next_metadata_location("file:///t/metadata/00003-abc.metadata.json");
        assert!(next.starts_with("file:///t/metadata/00004-") && next.ends_with(".metadata.json"), "{next}");
    }

    #[test]
    fn write_new_file_refuses_to_overwrite() {
        let dir = std::env::temp_dir().join(format!("lakehouse-commit-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let target = dir.join("v2.metadata.json");
        assert!(write_new_file(&target, b"first").unwrap());
        assert!(!write_new_file(&target, b"second").unwrap());
        assert_eq!(std::fs::read(&target).unwrap(), b"first");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1, "no temporary file left behind");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
