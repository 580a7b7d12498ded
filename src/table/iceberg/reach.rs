//! What the snapshots of an Iceberg table reference: each snapshot's manifest list, its
//! manifests, and the files those manifests list.
//!
//! Expiry and orphan detection both need this for many snapshots at once. Manifests are shared
//! between snapshots (a fast append carries every earlier manifest over), so each distinct
//! manifest is decoded once however many snapshots list it, and manifest lists and manifests are
//! read concurrently.

use std::collections::{HashMap, HashSet};

use iceberg::spec::{ManifestContentType, ManifestFile};

use futures::StreamExt;
use iceberg::io::FileIO;
use iceberg::spec::TableMetadata;

use crate::error::{Error, ErrorKind, Result};
use crate::runtime;
use crate::table::iceberg::IcebergTable;
use crate::table::iceberg::manifest_reader::FileRef;

/// Manifest lists parsed at once.
const LISTS_IN_FLIGHT: usize = 32;
/// Manifests read and decoded at once: bounds open files and the bytes held.
const MANIFESTS_IN_FLIGHT: usize = 16;

/// The files the manifest `file` names: by the lean reader, else by iceberg-rust's. Test builds
/// read every manifest both ways and fail on any difference.
async fn manifest_files(file_io: &FileIO, metadata: &TableMetadata, file: ManifestFile) -> Result<ManifestFiles> {
    let bytes = crate::table::iceberg::manifest::fetch(file_io, &file).await?;
    let length_bytes = file.manifest_length.max(0) as u64;
    let deletes = file.content == ManifestContentType::Deletes;
    let full = |file: &ManifestFile| -> Result<ManifestFiles> {
        let manifest = crate::table::iceberg::manifest::decode_bytes(&bytes, metadata, file)?;
        let mut files = ManifestFiles { length_bytes, deletes, ..Default::default() };
        for entry in manifest.entries() {
            let f = entry.data_file();
            if entry.is_alive() {
                files.live.push(FileRef {
                    path: f.file_path().to_string(),
                    size_bytes: f.file_size_in_bytes(),
                    content: f.content_type().into(),
                });
            } else {
                files.deleted.push(f.file_path().to_string());
            }
        }
        Ok(files)
    };
    let Some((live, deleted)) = crate::table::iceberg::manifest_reader::files(&bytes) else {
        return full(&file);
    };
    let lean = ManifestFiles { length_bytes, deletes, live, deleted };
    #[cfg(feature = "test-hooks")]
    {
        let checked = full(&file)?;
        if (&checked.live, &checked.deleted) != (&lean.live, &lean.deleted) {
            return Err(Error::new(
                ErrorKind::CorruptMetadata,
                format!("the lean manifest reader disagrees with iceberg-rust's on '{}'", file.manifest_path),
            ));
        }
    }
    Ok(lean)
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
    /// Snapshot id → the manifests its list names, as indexes for [`Reach::path`] (empty when
    /// the list is gone, see `missing`).
    pub manifests_of: HashMap<i64, Vec<u32>>,
    /// Every distinct manifest named by those lists.
    pub manifests: HashMap<String, ManifestFiles>,
    /// Manifest lists or manifests that no longer exist (only when loaded tolerantly).
    pub missing: Vec<String>,
    /// Every distinct manifest path named, and its manifest-list entry (what decoding needs), by
    /// index: snapshots name manifests by index, since a table with thousands of snapshots has
    /// millions of list entries but only thousands of distinct manifests.
    paths: Vec<String>,
    entries: Vec<Option<ManifestFile>>,
    index: HashMap<String, u32, foldhash::fast::RandomState>,
    /// Whether reading stopped before every snapshot asked for was read (see
    /// [`Reach::lists_until_covered`]).
    pub partial: bool,
}

impl Reach {
    /// Every file name `table`'s metadata and this reach hold, as written: the current metadata
    /// file, the metadata log, statistics and partition statistics files, manifest lists,
    /// manifests and every file their live entries name, and with `deleted_entries` also those
    /// their DELETED entries name. A file only DELETED entries name is read by no snapshot the
    /// reach holds (each snapshot that still reads it lists it live): Java's orphan removal
    /// takes live entries only (`ManifestFiles.readPaths`), so does ours.
    pub fn referenced_names<'a>(&'a self, table: &'a IcebergTable, deleted_entries: bool) -> Vec<&'a str> {
        let metadata = table.metadata.as_ref();
        let mut names: Vec<&str> = vec![table.metadata_location.as_str()];
        names.extend(metadata.metadata_log().iter().map(|m| m.metadata_file.as_str()));
        names.extend(metadata.statistics_iter().map(|s| s.statistics_path.as_str()));
        names.extend(metadata.partition_statistics_iter().map(|s| s.statistics_path.as_str()));
        names.extend(self.manifest_lists.values().map(String::as_str));
        for (path, manifest) in &self.manifests {
            names.push(path.as_str());
            names.extend(manifest.live.iter().map(|f| f.path.as_str()));
            if deleted_entries {
                names.extend(manifest.deleted.iter().map(String::as_str));
            }
        }
        names
    }

    /// Reads what `snapshot_ids` reference: their manifest lists and every manifest those name.
    /// With `tolerate_missing`, a manifest list or manifest that no longer exists is recorded in
    /// [`Reach::missing`] instead of failing: right for snapshots about to be expired, never for
    /// snapshots whose files must be kept.
    pub fn load(table: &IcebergTable, snapshot_ids: &[i64], tolerate_missing: bool) -> Result<Reach> {
        let mut reach = Self::lists(table, snapshot_ids, tolerate_missing)?;
        let all: Vec<String> = reach.manifest_paths().into_iter().map(str::to_string).collect();
        reach.decode(table, all, tolerate_missing)?;
        Ok(reach)
    }

    /// Reads the manifest lists of `snapshot_ids` only; manifests are decoded on demand with
    /// [`Reach::decode`].
    pub fn lists(table: &IcebergTable, snapshot_ids: &[i64], tolerate_missing: bool) -> Result<Reach> {
        Self::lists_until_covered(table, snapshot_ids, tolerate_missing, None)
    }

    /// Like [`Reach::lists`], reading the lists in the order given, but stopping early once every
    /// manifest of `covered` has been seen in some list (then [`Reach::partial`] is true):
    /// enough to prove that none of those manifests may be deleted, at a fraction of the reading
    /// when the newest lists carry every older manifest over (an append-only history).
    pub fn lists_until_covered(
        table: &IcebergTable,
        snapshot_ids: &[i64],
        tolerate_missing: bool,
        covered: Option<&HashSet<&str>>,
    ) -> Result<Reach> {
        let mut reach = Reach::default();
        for &id in snapshot_ids {
            let snapshot = table.metadata.snapshot_by_id(id).ok_or_else(|| {
                Error::new(ErrorKind::CorruptMetadata, format!("snapshot {id} is not in the table metadata"))
            })?;
            reach.manifest_lists.insert(id, snapshot.manifest_list().to_string());
        }
        // Parsing is CPU-bound: one task per list, spread over the runtime's workers, a bounded
        // number in flight so that only a few parsed lists are held at once.
        let lists: Vec<(i64, String)> = snapshot_ids.iter().map(|id| (*id, reach.manifest_lists[id].clone())).collect();
        for chunk in lists.chunks(LISTS_IN_FLIGHT) {
            if let Some(needed) = covered
                && needed.iter().all(|p| reach.index.contains_key(*p))
            {
                // The unread snapshots keep their manifest-list entries (a list path is still
                // known without reading it), only their manifests are unknown.
                reach.partial = true;
                break;
            }
            let mut pending = Vec::with_capacity(chunk.len());
            for (id, path) in chunk {
                let (table, path) = (table.clone(), path.clone());
                pending.push((*id, runtime::spawn(async move { (table.manifest_list_for_reach(&path).await, path) })?));
            }
            runtime::block_on(async {
                for (id, handle) in pending {
                    let (result, path) = handle
                        .await
                        .map_err(|e| Error::new(ErrorKind::Io, format!("manifest list reader failed: {e}")))?;
                    match result {
                        Ok(entries) => {
                            let ids =
                                entries.into_iter().map(|e| reach.intern(&e.manifest_path.clone(), Some(e))).collect();
                            reach.manifests_of.insert(id, ids);
                        }
                        Err(e) if tolerate_missing && e.kind() == ErrorKind::NotFound => {
                            reach.missing.push(path);
                            reach.manifests_of.insert(id, Vec::new());
                        }
                        Err(e) => return Err(e),
                    }
                }
                Ok(())
            })??;
        }
        Ok(reach)
    }

    /// The index of the manifest at `path`, remembering its list entry the first time.
    fn intern(&mut self, path: &str, entry: Option<ManifestFile>) -> u32 {
        if let Some(&i) = self.index.get(path) {
            return i;
        }
        let i = self.paths.len() as u32;
        self.index.insert(path.to_string(), i);
        self.paths.push(path.to_string());
        self.entries.push(entry);
        i
    }

    /// Records that snapshot `id` has the manifest list `list` naming `manifests` (for callers
    /// that know a snapshot's references without reading them, such as tests).
    pub fn add_snapshot(&mut self, id: i64, list: &str, manifests: &[&str]) {
        self.manifest_lists.insert(id, list.to_string());
        let ids = manifests.iter().map(|m| self.intern(m, None)).collect();
        self.manifests_of.insert(id, ids);
    }

    /// The path of manifest `i`.
    pub fn path(&self, i: u32) -> &str {
        &self.paths[i as usize]
    }

    /// Decodes the manifests at `paths` (named by the lists already read) that are not decoded
    /// yet, `MANIFESTS_IN_FLIGHT` at a time, each by the lean reader
    /// ([`crate::table::iceberg::manifest_reader::files`]) or else by iceberg-rust's.
    pub fn decode(&mut self, table: &IcebergTable, paths: Vec<String>, tolerate_missing: bool) -> Result<()> {
        let mut pending = Vec::new();
        for path in paths {
            if self.manifests.contains_key(&path) {
                continue;
            }
            let Some(file) = self.index.get(&path).and_then(|&i| self.entries[i as usize].clone()) else {
                return Err(Error::new(
                    ErrorKind::CorruptMetadata,
                    format!("manifest '{path}' is in no manifest list read"),
                ));
            };
            pending.push((path, file));
        }
        let decoded: Vec<(String, Result<ManifestFiles>)> = runtime::block_on(async {
            futures::stream::iter(pending)
                .map(|(path, file)| {
                    let (file_io, metadata) = (table.file_io.clone(), table.metadata.clone());
                    async move {
                        let handle = runtime::spawn(async move { manifest_files(&file_io, &metadata, file).await });
                        let result = match handle {
                            Ok(handle) => handle
                                .await
                                .map_err(|e| Error::new(ErrorKind::Io, format!("manifest reader failed: {e}")))
                                .and_then(|r| r),
                            Err(e) => Err(e),
                        };
                        (path, result)
                    }
                })
                .buffer_unordered(MANIFESTS_IN_FLIGHT)
                .collect()
                .await
        })?;
        for (path, result) in decoded {
            match result {
                Ok(files) => {
                    self.manifests.insert(path, files);
                }
                Err(e) if tolerate_missing && e.kind() == ErrorKind::NotFound => self.missing.push(path),
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Whether every manifest the lists name has been decoded (or is known missing).
    pub fn fully_decoded(&self) -> bool {
        self.manifest_paths().iter().all(|p| self.manifests.contains_key(*p) || self.missing.iter().any(|m| m == p))
    }

    /// Every manifest path the snapshots name.
    pub fn manifest_paths(&self) -> HashSet<&str> {
        let used: HashSet<u32> = self.manifests_of.values().flatten().copied().collect();
        used.into_iter().map(|i| self.path(i)).collect()
    }

    /// The manifest paths snapshot `id` names.
    pub fn manifests_of(&self, id: i64) -> impl Iterator<Item = &str> {
        self.manifests_of.get(&id).into_iter().flatten().map(|&i| self.path(i))
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
