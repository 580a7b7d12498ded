//! What the snapshots of an Iceberg table reference: each snapshot's manifest list, its
//! manifests, and the files those manifests list.
//!
//! Expiry and orphan detection both need this for many snapshots at once. Manifests are shared
//! between snapshots (a fast append carries every earlier manifest over), so each distinct
//! manifest is decoded once however many snapshots list it, and manifest lists and manifests are
//! read concurrently.

use std::collections::{HashMap, HashSet};

use futures::StreamExt;
use iceberg::spec::{DataContentType, ManifestContentType, ManifestFile};

use super::{FileContent, iceberg::IcebergTable, iceberg::load_manifest};
use crate::error::{Error, ErrorKind, Result};
use crate::runtime;

/// Manifest lists or manifests read at once.
const READ_CONCURRENCY: usize = 16;

/// A file a manifest entry names.
#[derive(Debug, Clone, PartialEq)]
pub struct FileRef {
    /// Location as written in the manifest.
    pub path: String,
    /// Size from the manifest entry.
    pub size_bytes: u64,
    /// Data, position deletes or equality deletes.
    pub content: FileContent,
}

/// One decoded manifest, reduced to the files it names.
#[derive(Debug, Clone, Default)]
pub struct ManifestFiles {
    /// The manifest file's own size.
    pub length_bytes: u64,
    /// Whether it is a delete manifest.
    pub deletes: bool,
    /// Files of its ADDED and EXISTING entries: what a snapshot listing it reads.
    pub live: Vec<FileRef>,
    /// Files of its DELETED entries: named, but read by no snapshot through this manifest.
    pub deleted: Vec<String>,
}

/// The references of a set of snapshots.
#[derive(Debug, Clone, Default)]
pub struct Reach {
    /// Snapshot id → its manifest list.
    pub manifest_lists: HashMap<i64, String>,
    /// Snapshot id → the manifests its list names (empty when the list is gone, see `missing`).
    pub manifests_of: HashMap<i64, Vec<String>>,
    /// Every distinct manifest named by those lists.
    pub manifests: HashMap<String, ManifestFiles>,
    /// Manifest lists or manifests that no longer exist (only when loaded tolerantly).
    pub missing: Vec<String>,
}

impl Reach {
    /// Reads what `snapshot_ids` reference. With `tolerate_missing`, a manifest list or manifest
    /// that no longer exists is recorded in [`Reach::missing`] instead of failing: right for
    /// snapshots about to be expired, never for snapshots whose files must be kept.
    pub fn load(table: &IcebergTable, snapshot_ids: &[i64], tolerate_missing: bool) -> Result<Reach> {
        let mut reach = Reach::default();
        for &id in snapshot_ids {
            let snapshot = table.metadata.snapshot_by_id(id).ok_or_else(|| {
                Error::new(ErrorKind::CorruptMetadata, format!("snapshot {id} is not in the table metadata"))
            })?;
            reach.manifest_lists.insert(id, snapshot.manifest_list().to_string());
        }
        let lists: Vec<(i64, String)> = reach.manifest_lists.iter().map(|(id, p)| (*id, p.clone())).collect();
        runtime::block_on(async {
            let mut listed = futures::stream::iter(
                lists.into_iter().map(|(id, path)| async move { (id, path.clone(), table.manifest_list(&path).await) }),
            )
            .buffer_unordered(READ_CONCURRENCY);
            let mut to_decode: HashMap<String, ManifestFile> = HashMap::new();
            while let Some((id, path, result)) = listed.next().await {
                match result {
                    Ok(entries) => {
                        let paths = entries.iter().map(|m| m.manifest_path.clone()).collect();
                        for entry in entries {
                            to_decode.entry(entry.manifest_path.clone()).or_insert(entry);
                        }
                        reach.manifests_of.insert(id, paths);
                    }
                    Err(e) if tolerate_missing && e.kind() == ErrorKind::NotFound => {
                        reach.missing.push(path);
                        reach.manifests_of.insert(id, Vec::new());
                    }
                    Err(e) => return Err(e),
                }
            }
            // Decoding is CPU-bound: one task per manifest, spread over the runtime's workers.
            let mut pending = Vec::with_capacity(to_decode.len());
            for file in to_decode.into_values() {
                let (path, length) = (file.manifest_path.clone(), file.manifest_length.max(0) as u64);
                let deletes = file.content == ManifestContentType::Deletes;
                let file_io = table.file_io.clone();
                pending.push((
                    path,
                    length,
                    deletes,
                    runtime::spawn(async move { load_manifest(&file_io, file).await })?,
                ));
            }
            for (path, length_bytes, deletes, handle) in pending {
                let loaded =
                    handle.await.map_err(|e| Error::new(ErrorKind::Io, format!("manifest reader failed: {e}")))?;
                match loaded {
                    Ok(loaded) => {
                        let mut files = ManifestFiles { length_bytes, deletes, ..Default::default() };
                        for entry in loaded.manifest.entries() {
                            let file = entry.data_file();
                            if entry.is_alive() {
                                files.live.push(FileRef {
                                    path: file.file_path().to_string(),
                                    size_bytes: file.file_size_in_bytes(),
                                    content: match file.content_type() {
                                        DataContentType::Data => FileContent::Data,
                                        DataContentType::PositionDeletes => FileContent::PositionDeletes,
                                        DataContentType::EqualityDeletes => FileContent::EqualityDeletes,
                                    },
                                });
                            } else {
                                files.deleted.push(file.file_path().to_string());
                            }
                        }
                        reach.manifests.insert(path, files);
                    }
                    Err(e) if tolerate_missing && e.kind() == ErrorKind::NotFound => reach.missing.push(path),
                    Err(e) => return Err(e),
                }
            }
            Ok(())
        })??;
        Ok(reach)
    }

    /// Every manifest path the snapshots name.
    pub fn manifest_paths(&self) -> HashSet<&str> {
        self.manifests_of.values().flatten().map(String::as_str).collect()
    }

    /// Every file live in some snapshot (an ADDED or EXISTING entry of a manifest it lists).
    pub fn live_files(&self) -> HashMap<&str, &FileRef> {
        let mut out = HashMap::new();
        for path in self.manifest_paths() {
            if let Some(m) = self.manifests.get(path) {
                for f in &m.live {
                    out.insert(f.path.as_str(), f);
                }
            }
        }
        out
    }
}
