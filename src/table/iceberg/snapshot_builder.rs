//! The one builder of a committer's new Iceberg snapshot on `main`: the committer says what it
//! does — manifests it keeps, manifests it rewrites without some entries, files it adds (each
//! with its partition spec and data sequence number), its operation and summary figures — and
//! [`SnapshotBuilder`] writes the manifests and the manifest list (format v3: the list assigns
//! the row ids, [`super::new_snapshot::ListWritten`]) and returns the metadata with the snapshot
//! as `main`'s head. Committing that metadata is [`super::commit`]'s.

use std::collections::{BTreeMap, HashMap};

use iceberg::spec::{
    DataFile as IcebergDataFile, ManifestContentType, ManifestEntry, ManifestFile, Operation, SortOrder, Summary,
    TableMetadata,
};

use super::new_snapshot::{
    check_added, manifest_writer, new_snapshot_id, rewrite_manifest_dropping, with_main_snapshot, write_manifest_list,
};
use super::{IcebergTable, LoadedManifest};
use crate::error::{Error, ErrorKind, Result};

/// A new snapshot of `table` being assembled: the manifests its list names, in order — the
/// manifests of files it adds first, then those it keeps or rewrote, in the order given. Every
/// file it writes is recorded in `scratch` (before it is written) for the caller's cleanup.
pub struct SnapshotBuilder<'a> {
    table: &'a IcebergTable,
    snapshot_id: i64,
    added: Vec<ManifestFile>,
    kept: Vec<ManifestFile>,
    scratch: &'a mut Vec<String>,
}

impl<'a> SnapshotBuilder<'a> {
    /// A snapshot after `table`'s current one, with a new id ([`new_snapshot_id`]).
    pub fn new(table: &'a IcebergTable, scratch: &'a mut Vec<String>) -> Self {
        SnapshotBuilder { table, snapshot_id: new_snapshot_id(), added: Vec::new(), kept: Vec::new(), scratch }
    }

    /// The new snapshot's id.
    pub fn snapshot_id(&self) -> i64 {
        self.snapshot_id
    }

    /// The table it is built on.
    pub fn table(&self) -> &'a IcebergTable {
        self.table
    }

    /// A path for a new manifest beside the current metadata file
    /// (`{metadata_dir}/{uuid}-{suffix}.avro`), recorded in `scratch`.
    pub fn manifest_path(&mut self, suffix: &str) -> String {
        let path = format!("{}/{}-{suffix}.avro", self.table.metadata_dir(), uuid::Uuid::new_v4());
        self.scratch.push(path.clone());
        path
    }

    /// Names `file` as it is (with its counts filled by the caller), after the manifests kept
    /// or rewritten before it.
    pub fn keep(&mut self, file: ManifestFile) {
        self.kept.push(file);
    }

    /// Names `file`, a manifest of files this snapshot adds, written by the caller (at a path
    /// from [`Self::manifest_path`]), after those added before it.
    pub fn add_manifest(&mut self, file: ManifestFile) {
        self.added.push(file);
    }

    /// Rewrites `manifests` (of one spec and content) into one manifest at a new path ending in
    /// `suffix`, the entries `drop` picks DELETED and the others EXISTING (each with its sequence
    /// numbers, the snapshot that added it and its first row id; `seen` is told of every live
    /// entry and whether it was dropped), and names it like a kept one.
    pub async fn rewrite_dropping(
        &mut self,
        manifests: &[&LoadedManifest],
        suffix: &str,
        drop: impl Fn(&ManifestEntry) -> bool,
        seen: impl FnMut(&ManifestEntry, bool),
    ) -> Result<()> {
        let path = self.manifest_path(suffix);
        let (table, id) = (self.table, self.snapshot_id);
        let version = table.metadata.format_version();
        let file = rewrite_manifest_dropping(&table.file_io, &path, id, version, manifests, drop, seen).await?;
        self.kept.push(file);
        Ok(())
    }

    /// Writes `files` (each with its partition spec id and data sequence number) ADDED, one
    /// manifest of `content` per partition spec in ascending spec id, each at a new path ending
    /// in `suffix`, with the current schema; a file's order within its spec is kept.
    pub async fn add_files(
        &mut self,
        content: ManifestContentType,
        suffix: &str,
        files: impl IntoIterator<Item = (i32, IcebergDataFile, i64)>,
    ) -> Result<()> {
        let mut by_spec: BTreeMap<i32, Vec<(IcebergDataFile, i64)>> = BTreeMap::new();
        for (spec_id, file, sequence_number) in files {
            by_spec.entry(spec_id).or_default().push((file, sequence_number));
        }
        let metadata = &self.table.metadata;
        for (spec_id, files) in by_spec {
            let spec = metadata.partition_spec_by_id(spec_id).ok_or_else(|| {
                Error::new(ErrorKind::CorruptMetadata, format!("partition spec {spec_id} is missing"))
            })?;
            let path = self.manifest_path(suffix);
            let mut writer = manifest_writer(
                &self.table.file_io,
                &path,
                self.snapshot_id,
                metadata.current_schema().clone(),
                spec.as_ref().clone(),
                metadata.format_version(),
                content,
            )?;
            for (file, sequence_number) in files {
                writer.add_file(file, sequence_number)?;
            }
            self.added.push(writer.write_manifest_file().await?);
        }
        Ok(())
    }

    /// Writes the manifest list and returns the table's metadata with the snapshot as `main`'s
    /// head, and its id: `operation`, its summary `properties` (with `engine-name`), taken now
    /// with the current schema at the next sequence number. `add_order`: a sort order the new
    /// files name, added to the metadata and checked to have kept its id ([`check_added`]).
    pub async fn finish(
        self,
        operation: Operation,
        mut properties: HashMap<String, String>,
        add_order: Option<&SortOrder>,
    ) -> Result<(TableMetadata, i64)> {
        let SnapshotBuilder { table, snapshot_id, added, kept, scratch } = self;
        let list = write_manifest_list(table, snapshot_id, added.into_iter().chain(kept), scratch).await?;
        properties.insert("engine-name".to_string(), "lakehouse".to_string());
        let summary = Summary { operation, additional_properties: properties };
        let next = with_main_snapshot(table, snapshot_id, list, summary, add_order)?;
        if let Some(order) = add_order {
            check_added(&next, order)?;
        }
        Ok((next, snapshot_id))
    }
}

/// The summary properties of `metadata`'s current snapshot that `carry` picks (by key): the
/// totals a snapshot that changes none of them carries over.
pub fn carried_summary(metadata: &TableMetadata, carry: impl Fn(&str) -> bool) -> HashMap<String, String> {
    metadata
        .current_snapshot()
        .map(|s| {
            s.summary()
                .additional_properties
                .iter()
                .filter(|(k, _)| carry(k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default()
}
