//! Deleting the files an action planned to delete ([`Deletion`]s: expired snapshots' files,
//! orphans, a Delta table's vacuumed files), only inside the table location: in parallel, each
//! with its outcome, a file already gone being fine. Local files whose real path (symlinks
//! resolved) leaves the table's root are kept; object-store deletes go in batches.

use std::path::Path;

use futures::StreamExt;

use crate::action::boundary::within_real;
use crate::error::{Error, Result};
use crate::plan::expiry::Deletion;

/// Files deleted at once.
pub const DELETE_CONCURRENCY: usize = 8;

/// What happened to one file.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Dry run: it would be deleted.
    WouldDelete,
    /// Deleted.
    Deleted,
    /// It did not exist any more (not an error).
    AlreadyGone,
    /// Outside the table location, or the location outside the table's root: reported, never
    /// deleted.
    OutsideLocation,
    /// Its real path (symlinks resolved) leaves the table's root: reported, never deleted.
    OutsideRoot,
    /// The delete failed; the file is an orphan for a later cleanup.
    Failed(String),
    /// Not deleted: the query was interrupted first; the file is an orphan for a later cleanup.
    Interrupted,
}

impl Outcome {
    /// The text shown in result rows.
    pub fn describe(&self) -> String {
        match self {
            Outcome::WouldDelete => "would delete".into(),
            Outcome::Deleted => "deleted".into(),
            Outcome::AlreadyGone => "already gone".into(),
            Outcome::OutsideLocation => "kept: outside the table location".into(),
            Outcome::OutsideRoot => "kept: its real path (symlinks resolved) leaves the table's root".into(),
            Outcome::Failed(e) => format!("delete failed: {e}"),
            Outcome::Interrupted => "kept: interrupted before its delete (an orphan cleanup removes it)".into(),
        }
    }
}

/// A deletion with its outcome and the size found on disk when metadata had none.
#[derive(Debug, Clone, PartialEq)]
pub struct DeletedFile {
    /// The planned deletion.
    pub deletion: Deletion,
    /// Bytes (from metadata, else from the file system; 0 when unknown).
    pub size_bytes: u64,
    /// What happened.
    pub outcome: Outcome,
}

impl DeletedFile {
    /// Whether the file was deleted (or, dry, would be).
    pub fn removed(&self) -> bool {
        matches!(self.outcome, Outcome::Deleted | Outcome::WouldDelete)
    }

    /// Bytes this file gives back (or, dry, would).
    pub fn reclaimed_bytes(&self) -> u64 {
        if self.removed() { self.size_bytes } else { 0 }
    }
}

/// Deletes (or, `dry`, only sizes) every deletion inside the table location, on
/// [`DELETE_CONCURRENCY`] threads; keeps the planned order. `real_root`: a local table's root,
/// symlinks resolved — a file whose real path leaves it is kept ([`Outcome::OutsideRoot`]),
/// checked just before its delete.
pub fn delete_files(deletions: Vec<Deletion>, dry: bool, real_root: Option<&Path>) -> Vec<DeletedFile> {
    let count = deletions.len();
    crate::progress_lines::line(|| format!("{} {count} files", if dry { "checking" } else { "deleting" }));
    let done = if deletions.first().is_some_and(|d| crate::store::local_path(&d.path).is_none()) {
        delete_remote(deletions, dry)
    } else {
        delete_local(deletions, dry, real_root)
    };
    crate::progress_lines::line(|| {
        let removed = done.iter().filter(|f| f.removed()).count();
        let bytes: u64 = done.iter().filter(|f| f.removed()).map(|f| f.size_bytes).sum();
        format!(
            "{removed} of {count} files {} ({:.1} MiB)",
            if dry { "would go" } else { "deleted" },
            bytes as f64 / crate::profile::MIB
        )
    });
    done
}

/// [`delete_files`] on a local disk, [`DELETE_CONCURRENCY`] at a time.
fn delete_local(deletions: Vec<Deletion>, dry: bool, real_root: Option<&Path>) -> Vec<DeletedFile> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<std::sync::Mutex<Option<DeletedFile>>> =
        deletions.iter().map(|_| std::sync::Mutex::new(None)).collect();
    let workers = DELETE_CONCURRENCY.min(deletions.len()).max(1);
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(deletion) = deletions.get(i) else { break };
                    let done = if !dry && crate::interrupt::interrupted() {
                        DeletedFile {
                            deletion: deletion.clone(),
                            size_bytes: deletion.size_bytes.unwrap_or(0),
                            outcome: Outcome::Interrupted,
                        }
                    } else {
                        delete_one(deletion, dry, real_root)
                    };
                    if let Ok(mut slot) = results[i].lock() {
                        *slot = Some(done);
                    }
                }
            });
        }
    });
    results
        .into_iter()
        .zip(deletions)
        .map(|(slot, deletion)| {
            slot.into_inner().ok().flatten().unwrap_or_else(|| DeletedFile {
                size_bytes: deletion.size_bytes.unwrap_or(0),
                deletion,
                outcome: Outcome::Failed("the delete worker stopped".into()),
            })
        })
        .collect()
}

/// [`delete_files`] on object storage: existence and sizes by HEAD (bounded in flight by the
/// store's permits), deletes in `DeleteObjects` batches of 1,000.
fn delete_remote(deletions: Vec<Deletion>, dry: bool) -> Vec<DeletedFile> {
    use std::collections::HashMap;
    let inside: Vec<&Deletion> = deletions.iter().filter(|d| d.inside_location).collect();
    // What exists now: one HEAD per file (bounded in flight by the store's permits).
    let heads: HashMap<String, Option<u64>> = crate::runtime::block_on(async {
        let lookups = inside.iter().map(|d| async move {
            let found = crate::store::head(&d.path).await.ok().flatten().map(|o| o.size_bytes);
            (d.path.clone(), found)
        });
        futures::stream::iter(lookups).buffer_unordered(crate::store::max_in_flight()).collect::<HashMap<_, _>>().await
    })
    .unwrap_or_default();
    let present = |d: &Deletion| heads.get(&d.path).copied().flatten();
    let to_delete: Vec<String> = if dry || crate::interrupt::interrupted() {
        Vec::new()
    } else {
        inside.iter().filter(|d| present(d).is_some()).map(|d| d.path.clone()).collect()
    };
    let outcomes: HashMap<String, Result<()>> = if to_delete.is_empty() {
        HashMap::new()
    } else {
        let results = crate::runtime::block_on(crate::store::delete_many(to_delete.clone()))
            .unwrap_or_else(|e| to_delete.iter().map(|_| Err(Error::new(e.kind(), e.message().to_string()))).collect());
        to_delete.into_iter().zip(results).collect()
    };
    deletions
        .into_iter()
        .map(|deletion| {
            let on_store = present(&deletion);
            let size_bytes = deletion.size_bytes.or(on_store).unwrap_or(0);
            let outcome = if !deletion.inside_location {
                Outcome::OutsideLocation
            } else if on_store.is_none() {
                Outcome::AlreadyGone
            } else if dry {
                Outcome::WouldDelete
            } else {
                match outcomes.get(&deletion.path) {
                    Some(Ok(())) => Outcome::Deleted,
                    Some(Err(e)) => Outcome::Failed(e.message().to_string()),
                    None => Outcome::Interrupted,
                }
            };
            DeletedFile { deletion, size_bytes, outcome }
        })
        .collect()
}

/// Hadoop's local file system (what Spark, Flink and Hive write through) keeps a checksum file
/// `.<name>.crc` beside each file it writes, hides it from listings and deletes it with the file.
/// So does this: once `path` is deleted, its companion goes too (best effort; orphan listings never
/// show hidden files, as Java's do not, so a companion left behind would stay forever).
fn remove_checksum_companion(path: &Path) {
    if let (Some(dir), Some(name)) = (path.parent(), path.file_name()) {
        let companion = dir.join(format!(".{}.crc", name.to_string_lossy()));
        if companion.is_file() {
            let _ = std::fs::remove_file(companion);
        }
    }
}

fn delete_one(deletion: &Deletion, dry: bool, real_root: Option<&Path>) -> DeletedFile {
    let local = crate::store::local_path(&deletion.path).unwrap_or(&deletion.path);
    let on_disk = std::fs::symlink_metadata(local);
    let size_bytes = deletion.size_bytes.or_else(|| on_disk.as_ref().ok().map(|m| m.len())).unwrap_or(0);
    let outcome = if !deletion.inside_location {
        Outcome::OutsideLocation
    } else if on_disk.is_ok() && real_root.is_some_and(|root| !within_real(Path::new(local), root)) {
        Outcome::OutsideRoot
    } else if on_disk.is_err() {
        Outcome::AlreadyGone
    } else if dry {
        Outcome::WouldDelete
    } else {
        match std::fs::remove_file(local) {
            Ok(()) => {
                remove_checksum_companion(Path::new(local));
                Outcome::Deleted
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Outcome::AlreadyGone,
            Err(e) => Outcome::Failed(e.to_string()),
        }
    };
    DeletedFile { deletion: deletion.clone(), size_bytes, outcome }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::expiry::FileKind;

    #[test]
    fn deletion_stays_inside_the_location_and_tolerates_missing_files() {
        let dir = std::env::temp_dir().join(format!("lakehouse-expire-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(dir.join("t/data")).unwrap();
        std::fs::write(dir.join("t/data/a.parquet"), b"abc").unwrap();
        std::fs::write(dir.join("outside.parquet"), b"keep").unwrap();
        let location = dir.join("t").to_string_lossy().into_owned();
        let plan = |path: std::path::PathBuf| Deletion {
            kind: FileKind::DataFile,
            path: format!("file://{}", path.display()),
            size_bytes: None,
            snapshot_id: None,
            inside_location: crate::store::is_inside(&path.to_string_lossy(), &location),
        };
        let deletions = vec![
            plan(dir.join("t/data/a.parquet")),
            plan(dir.join("t/data/gone.parquet")),
            plan(dir.join("outside.parquet")),
        ];
        let dry = delete_files(deletions.clone(), true, None);
        assert_eq!(
            dry.iter().map(|d| d.outcome.clone()).collect::<Vec<_>>(),
            vec![Outcome::WouldDelete, Outcome::AlreadyGone, Outcome::OutsideLocation]
        );
        assert_eq!(dry[0].size_bytes, 3);
        assert!(dir.join("t/data/a.parquet").exists());
        let done = delete_files(deletions, false, None);
        assert_eq!(done[0].outcome, Outcome::Deleted);
        assert_eq!(done[0].reclaimed_bytes(), 3);
        assert!(!dir.join("t/data/a.parquet").exists());
        assert_eq!(std::fs::read(dir.join("outside.parquet")).unwrap(), b"keep");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
