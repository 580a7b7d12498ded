//! The Iceberg commit of a rewrite: one `replace` snapshot (the replaced data files DELETED, the
//! new ones ADDED with the starting sequence number, dangling delete files removed), retried on a
//! moved head while the rewrite is still valid there (`commit_with_retries`).

use std::collections::{BTreeMap, HashMap, HashSet};

use ::iceberg::spec::{
    DataContentType, DataFile as IcebergDataFile, ManifestContentType, ManifestFile, Operation, Summary, TableMetadata,
};

use super::run::Committed;
use crate::error::{Error, ErrorKind, Result};
use crate::interrupt;
use crate::interrupt::pause_for_tests;
use crate::runtime;
use crate::store::location_key;
use crate::table::iceberg::commit::{CommitOutcome, commit_table, relocate, snapshot_landed};
use crate::table::iceberg::history::descends_from;
use crate::table::iceberg::new_snapshot::{
    manifest_writer, new_snapshot_id, rewrite_manifest_dropping, with_main_snapshot, write_manifest_list,
};
use crate::table::iceberg::{CarriedManifest, IcebergTable, LoadedManifest, with_counts};
use crate::table::{self, DataFile, FileContent, Located, PartitionKey};

/// Commit attempts before giving up on a table that keeps moving.
const MAX_COMMIT_ATTEMPTS: usize = 4;

/// The table state a commit is built on.
pub(super) struct Base {
    pub(super) located: Located,
    pub(super) table: IcebergTable,
    pub(super) manifests: Vec<LoadedManifest>,
    /// Manifests named as they are, undecoded: none holds a file the commit replaces, and the
    /// table has no delete file (so no delete can be left dangling by the commit).
    pub(super) carried: Vec<CarriedManifest>,
    /// A sort order the commit adds, which the new files name ([`IcebergLayout::add`]).
    pub(super) add_order: Option<::iceberg::spec::SortOrder>,
}

impl Base {
    /// The table's current head, as a base: the manifests it still shares with this one's
    /// carried ones (unchanged, so still holding no replaced file) carried again, every other
    /// decoded.
    fn at_head(&self) -> Result<Base> {
        let located = relocate(&self.located)?;
        let table = IcebergTable::load(&located.metadata_location)?;
        let carried_now: HashMap<&str, &CarriedManifest> =
            self.carried.iter().map(|c| (c.file.manifest_path.as_str(), c)).collect();
        let (mut decode, mut carried) = (Vec::new(), Vec::new());
        for file in table.current_manifests()? {
            match carried_now.get(file.manifest_path.as_str()) {
                Some(c) => carried.push((*c).clone()),
                None => decode.push(file),
            }
        }
        let manifests = table.decode_manifests(decode)?;
        Ok(Base { located, table, manifests, carried, add_order: self.add_order.clone() })
    }
}

/// What a rewrite read, which a head it is committed on must still hold ([`check_rebase`]).
pub(super) struct Start {
    /// The snapshot read (`None`: the table had none).
    pub(super) snapshot_id: Option<i64>,
    /// Its sequence number: the data sequence number the new files take.
    pub(super) sequence_number: i64,
    /// Each replaced file's `first_row_id` as read (format v3 row lineage): the rows written
    /// carry the ids it gave them, or none when it was null.
    pub(super) first_row_ids: HashMap<String, Option<i64>>,
}

/// Commits, retrying on a moved head while the rewrite is still valid there ([`check_rebase`]);
/// `moved`: the head has moved since `base` (an earlier batch of this rewrite committed,
/// [`super::progress`]), so the first attempt is on the head too. New files take the data
/// sequence number of the snapshot the rewrite read (`start`). The delete `candidates` are the
/// delete files that applied to the replaced files (so the rewrite applied them): each must still
/// be live on the head committed to; those dangling there ([`dangling_deletes`]) are removed by
/// the same snapshot and returned with the commit (its `files` left for the caller to fill).
pub(super) fn commit_with_retries<'c>(
    mut base: Base,
    moved: bool,
    start: &Start,
    written: &[Written],
    candidates: &'c [Candidate],
) -> Result<(Committed, Vec<&'c Candidate>)> {
    let starting_sequence_number = start.sequence_number;
    let replaced: HashSet<&str> = written.iter().flat_map(|w| w.replaces.iter().map(String::as_str)).collect();
    // The new data files are on disk before any metadata names them (each attempt's manifests
    // and list are flushed before its commit).
    sync_files(written.iter().filter(|w| w.data_file.is_some()).map(|w| w.local_path.as_str()))?;
    pause_for_tests();
    if moved {
        base = base.at_head()?;
        check_rebase(&base, start, &replaced, candidates)?;
    }
    if !candidates.is_empty() && !base.carried.is_empty() {
        // Which delete files dangle is judged on every live file: decode them all.
        let manifests = base.table.load_manifests()?;
        base = Base { manifests, carried: Vec::new(), ..base };
    }
    for _attempt in 0..MAX_COMMIT_ATTEMPTS {
        interrupt::check("nothing was committed")?;
        let head: Vec<DataFile> = base.manifests.iter().flat_map(|m| base.table.model_files(m)).collect();
        let removed = dangling_deletes(&head, &replaced, candidates);
        let removing: HashSet<(&str, Option<i64>)> = removed.iter().map(|c| c.file.entry()).collect();
        let mut scratch = Vec::new();
        let attempt = (|| {
            let (metadata, snapshot_id) =
                build_snapshot(&base, starting_sequence_number, &replaced, &removing, written, &mut scratch)?;
            sync_files(scratch.iter().map(String::as_str))?;
            Ok::<_, Error>((commit_table(&base.located, &base.table, &metadata)?, snapshot_id))
        })();
        let committed = |id, location, warning| Committed { id, location, warning, deletes_removed: HashMap::new() };
        match attempt {
            Ok((CommitOutcome::Committed { location, warning }, snapshot_id)) => {
                return Ok((committed(snapshot_id, location, warning), removed));
            }
            Ok((CommitOutcome::Unknown(why), snapshot_id)) => {
                let (snapshot_id, location) = settle_unknown(&base.located, snapshot_id, &why)?;
                return Ok((committed(snapshot_id, location, None), removed));
            }
            Ok((CommitOutcome::Conflict, _)) => {
                remove_all(&scratch);
                base = base.at_head()?;
                check_rebase(&base, start, &replaced, candidates)?;
            }
            Err(e) => {
                remove_all(&scratch);
                return Err(e);
            }
        }
    }
    Err(Error::conflict(format!(
        "the table kept changing; gave up after {MAX_COMMIT_ATTEMPTS} attempts; nothing was committed and the \
         rewritten files were removed"
    )))
}

/// After a commit whose outcome the catalog did not report (`why`): reloads the table; our
/// snapshot there means it landed. Otherwise nothing is cleaned up — a commit that lands late
/// would reference the files — and the error says so ([`ErrorKind::CommitUnknown`]).
fn settle_unknown(located: &Located, snapshot_id: i64, why: &str) -> Result<(i64, String)> {
    let unknown = |detail: String| {
        Error::new(
            ErrorKind::CommitUnknown,
            format!(
                "the catalog or store did not confirm the commit ({why}) and {detail}; the rewritten files were left in place \
                 (orphan removal deletes them once nothing references them); run again to compact"
            ),
        )
    };
    match snapshot_landed(located, snapshot_id) {
        Ok(Some(location)) => Ok((snapshot_id, location)),
        Ok(None) => Err(unknown("the reloaded table does not show it".into())),
        Err(e) => Err(unknown(format!("the table could not be reloaded: {}", e.message()))),
    }
}

/// Whether a rewrite that read `start` can be committed on `head`:
/// - the head descends from the snapshot read ([`descends_from`]): after a rollback the rewrite
///   would carry deletes the table no longer has, and delete again the rows it restored;
/// - every replaced file is still live, with the `first_row_id` it was read with (format v3: an
///   upgraded table's first v3 commit gives the old manifests ids; rows written without them
///   would get fresh ones at this commit and change identity);
/// - every delete file the rewrite applied (`applied`) is still live (one rewritten or removed
///   meanwhile is another history of the rows);
/// - no position delete committed since (a data sequence number above the start) applies to a
///   replaced file — its rows would come back, since the new files do not carry the positions it
///   names. Equality deletes committed since are fine: the new files keep the starting sequence
///   number, so they still apply (Java's rule with `use-starting-sequence-number`).
fn check_rebase(head: &Base, start: &Start, replaced: &HashSet<&str>, applied: &[Candidate]) -> Result<()> {
    let refuse = |why: String| {
        Err(Error::conflict(format!("{why}; nothing was committed and the rewritten files were removed")))
    };
    if let Some(id) = start.snapshot_id {
        let metadata = &head.table.metadata;
        let current = metadata.current_snapshot().map(|s| s.snapshot_id());
        if let Some(why) = descends_from(metadata, id).refusal(id, current) {
            return refuse(why);
        }
    }
    let files: Vec<DataFile> = head.manifests.iter().flat_map(|m| head.table.model_files(m)).collect();
    let live: HashMap<&str, &DataFile> = files.iter().map(|f| (f.path.as_str(), f)).collect();
    if let Some(gone) = replaced.iter().find(|p| !live.contains_key(**p)) {
        return refuse(format!("the table changed while compacting and '{gone}' is no longer live"));
    }
    let new_position_deletes = files
        .iter()
        .filter(|f| f.content == table::FileContent::PositionDeletes && f.data_sequence_number > start.sequence_number);
    for delete in new_position_deletes {
        if let Some(target) = replaced.iter().find(|p| delete.applies_to(live[**p])) {
            return refuse(format!(
                "a delete committed while compacting ('{}') can delete rows of '{target}', which this compaction \
                 replaces",
                delete.path
            ));
        }
    }
    let live_entries: HashSet<(&str, Option<i64>)> = files.iter().map(DataFile::entry).collect();
    if let Some(gone) = applied.iter().find(|c| !live_entries.contains(&c.file.entry())) {
        return refuse(format!(
            "the table changed while compacting and '{}', a delete file this compaction applied, is no longer live",
            gone.file.path
        ));
    }
    let row_ids_at_head = head
        .manifests
        .iter()
        .flat_map(|m| m.manifest.entries().iter().filter(|e| e.is_alive()))
        .filter(|e| replaced.contains(e.file_path()));
    for entry in row_ids_at_head {
        let now = entry.data_file().first_row_id();
        if let Some(read) = start.first_row_ids.get(entry.file_path()).filter(|read| **read != now) {
            return refuse(format!(
                "the row ids of '{}' changed while compacting (first_row_id {} when read, {} now: the table's first \
                 format v3 commit gave its rows ids)",
                entry.file_path(),
                read.map_or("null".to_string(), |id| id.to_string()),
                now.map_or("null".to_string(), |id| id.to_string()),
            ));
        }
    }
    Ok(())
}

/// Flushes the files a commit will name to disk, before the metadata that names them.
pub(super) fn sync_files<'a>(paths: impl IntoIterator<Item = &'a str>) -> Result<()> {
    // An object store's PUT is durable once it returns; only local files need flushing.
    crate::store::sync_local(paths)
}

fn remove_all(paths: &[String]) {
    crate::store::remove_quietly(paths.iter().map(String::as_str));
}

/// Writes the manifests and manifest list of the replace snapshot on `table` (replacing the
/// `replaced` data files by the `written` ones and removing the `removing` delete files);
/// returns the new metadata. Every file written is recorded in `scratch` for cleanup.
fn build_snapshot(
    base: &Base,
    starting_sequence_number: i64,
    replaced: &HashSet<&str>,
    removing: &HashSet<(&str, Option<i64>)>,
    written: &[Written],
    scratch: &mut Vec<String>,
) -> Result<(TableMetadata, i64)> {
    let (table, manifests) = (&base.table, &base.manifests);
    let metadata = &table.metadata;
    let version = metadata.format_version();
    let file_io = &table.file_io;
    let snapshot_id = new_snapshot_id();
    let metadata_dir = table.metadata_dir();
    let new_manifest_path = |suffix: &str| format!("{metadata_dir}/{}-{suffix}.avro", uuid::Uuid::new_v4());

    let mut new_manifests: Vec<ManifestFile> = Vec::new();
    let mut found = 0usize;
    let (mut deleted_files, mut deleted_records, mut removed_bytes) = (0u64, 0u64, 0u64);
    let (mut total_files, mut total_records, mut total_bytes, mut total_deletes) = (0u64, 0u64, 0u64, 0u64);
    // Removed delete files: (files, deletes in them) per kind.
    let (mut removed_position, mut removed_equality, mut removed_deletes_found) = ((0u64, 0u64), (0u64, 0u64), 0usize);
    runtime::block_on(async {
        // Carry over or rewrite the existing manifests.
        let removes =
            |e: &::iceberg::spec::ManifestEntry| removing.contains(&(e.file_path(), e.data_file().content_offset()));
        // Data manifests every live file of which is replaced, per partition spec: their entries
        // go DELETED into one manifest per spec, not one manifest each.
        let mut emptied: BTreeMap<i32, Vec<&LoadedManifest>> = BTreeMap::new();
        for loaded in manifests {
            let alive: Vec<_> = loaded.manifest.entries().iter().filter(|e| e.is_alive()).collect();
            // A manifest left with no live entry by an earlier snapshot (only the files that
            // snapshot removed) is not carried into this one, as Java's snapshot producers keep
            // only manifests with added or existing files or written by the committing snapshot.
            if alive.is_empty() {
                continue;
            }
            if loaded.file.content == ManifestContentType::Deletes {
                if !alive.iter().any(|e| removes(e)) {
                    total_deletes += alive.len() as u64;
                    new_manifests.push(with_counts(loaded));
                    continue;
                }
                let path = new_manifest_path("m2");
                scratch.push(path.clone());
                let file = rewrite_manifest_dropping(
                    file_io,
                    &path,
                    snapshot_id,
                    version,
                    &[loaded],
                    removes,
                    |e, dropped| {
                        if dropped {
                            removed_deletes_found += 1;
                            let slot = match e.content_type() {
                                DataContentType::EqualityDeletes => &mut removed_equality,
                                _ => &mut removed_position,
                            };
                            slot.0 += 1;
                            slot.1 += e.record_count();
                        } else {
                            total_deletes += 1;
                        }
                    },
                )
                .await?;
                new_manifests.push(file);
                continue;
            }
            let touched = alive.iter().any(|e| replaced.contains(e.file_path()));
            if !touched {
                for e in &alive {
                    total_files += 1;
                    total_records += e.record_count();
                    total_bytes += e.file_size_in_bytes();
                }
                new_manifests.push(with_counts(loaded));
                continue;
            }
            if alive.iter().all(|e| replaced.contains(e.file_path())) {
                for e in &alive {
                    found += 1;
                    deleted_files += 1;
                    deleted_records += e.record_count();
                    removed_bytes += e.file_size_in_bytes();
                }
                emptied.entry(loaded.file.partition_spec_id).or_default().push(loaded);
                continue;
            }
            let path = new_manifest_path("m0");
            scratch.push(path.clone());
            let drops = |e: &::iceberg::spec::ManifestEntry| replaced.contains(e.file_path());
            let file =
                rewrite_manifest_dropping(file_io, &path, snapshot_id, version, &[loaded], drops, |e, dropped| {
                    if dropped {
                        found += 1;
                        deleted_files += 1;
                        deleted_records += e.record_count();
                        removed_bytes += e.file_size_in_bytes();
                    } else {
                        total_files += 1;
                        total_records += e.record_count();
                        total_bytes += e.file_size_in_bytes();
                    }
                })
                .await?;
            new_manifests.push(file);
        }
        for group in emptied.values() {
            let path = new_manifest_path("m0");
            scratch.push(path.clone());
            let all = |_: &::iceberg::spec::ManifestEntry| true;
            let file = rewrite_manifest_dropping(file_io, &path, snapshot_id, version, group, all, |_, _| {}).await?;
            new_manifests.push(file);
        }
        for carried in base.carried.iter().filter(|c| c.has_live_entries()) {
            total_files += carried.files;
            total_records += carried.records;
            total_bytes += carried.bytes;
            new_manifests.push(carried.file.clone());
        }
        if found != replaced.len() || removed_deletes_found != removing.len() {
            return Err(Error::new(
                ErrorKind::CorruptMetadata,
                format!(
                    "{} of the files to replace or remove are not live in the base snapshot",
                    replaced.len() + removing.len() - found - removed_deletes_found
                ),
            ));
        }
        // One manifest of added files per partition spec.
        let mut by_spec: HashMap<i32, Vec<&Written>> = HashMap::new();
        for w in written.iter().filter(|w| w.data_file.is_some()) {
            by_spec.entry(w.spec_id).or_default().push(w);
        }
        let mut added_manifests = Vec::new();
        let (mut added_records, mut added_bytes) = (0u64, 0u64);
        for (spec_id, files) in by_spec {
            let spec = metadata.partition_spec_by_id(spec_id).ok_or_else(|| {
                Error::new(ErrorKind::CorruptMetadata, format!("partition spec {spec_id} is missing"))
            })?;
            let path = new_manifest_path("m1");
            scratch.push(path.clone());
            let mut writer = manifest_writer(
                file_io,
                &path,
                snapshot_id,
                metadata.current_schema().clone(),
                spec.as_ref().clone(),
                version,
                ManifestContentType::Data,
            )?;
            for file in files.iter().filter_map(|w| w.data_file.as_ref()) {
                added_records += file.record_count();
                added_bytes += file.file_size_in_bytes();
                writer.add_file(file.clone(), starting_sequence_number)?;
            }
            added_manifests.push(writer.write_manifest_file().await?);
        }
        let added_files = written.iter().filter(|w| w.data_file.is_some()).count();
        total_files += added_files as u64;
        total_records += added_records;
        total_bytes += added_bytes;

        let list_path =
            write_manifest_list(table, snapshot_id, added_manifests.into_iter().chain(new_manifests), scratch).await?;

        let mut properties = HashMap::from([
            ("added-data-files".to_string(), added_files.to_string()),
            ("deleted-data-files".to_string(), deleted_files.to_string()),
            ("added-records".to_string(), added_records.to_string()),
            ("deleted-records".to_string(), deleted_records.to_string()),
            ("added-files-size".to_string(), added_bytes.to_string()),
            ("removed-files-size".to_string(), removed_bytes.to_string()),
            ("total-data-files".to_string(), total_files.to_string()),
            ("total-records".to_string(), total_records.to_string()),
            ("total-files-size".to_string(), total_bytes.to_string()),
            ("total-delete-files".to_string(), total_deletes.to_string()),
            ("engine-name".to_string(), "lakehouse".to_string()),
        ]);
        if !removing.is_empty() {
            properties.extend([
                ("removed-delete-files".to_string(), (removed_position.0 + removed_equality.0).to_string()),
                ("removed-position-delete-files".to_string(), removed_position.0.to_string()),
                ("removed-equality-delete-files".to_string(), removed_equality.0.to_string()),
                ("removed-position-deletes".to_string(), removed_position.1.to_string()),
                ("removed-equality-deletes".to_string(), removed_equality.1.to_string()),
            ]);
        }
        let summary = Summary { operation: Operation::Replace, additional_properties: properties };
        let next = with_main_snapshot(table, snapshot_id, list_path, summary, base.add_order.as_ref())?;
        if let Some(order) = &base.add_order {
            crate::table::iceberg::new_snapshot::check_added(&next, order)?;
        }
        Ok((next, snapshot_id))
    })?
}

/// A file written by the rewrite, ready for a manifest.
pub(super) struct Written {
    pub(super) local_path: String,
    /// `None` when every row of the inputs was deleted: nothing to add.
    pub(super) data_file: Option<IcebergDataFile>,
    pub(super) replaces: Vec<String>,
    pub(super) spec_id: i32,
}

/// A delete file that applied to a replaced data file: removed by the commit when no live data
/// file is left that it can delete rows of ([`dangling_deletes`]).
#[derive(Debug, Clone)]
pub(super) struct Candidate {
    pub(super) file: DataFile,
    /// For a position delete file: the data files it names (`None`: unknown, then any live file
    /// of its scope and sequence range keeps it).
    pub(super) targets: Option<HashSet<std::path::PathBuf>>,
    /// The partitions of the replaced files it applied to (for the report).
    pub(super) partitions: HashSet<PartitionKey>,
}

/// The candidates that no live data file of `head` (other than the `replaced` ones) needs: an
/// equality delete when no such file is in its scope with a lower data sequence number; a
/// position delete when none it names (or, unknown, none in its scope and range) is live. The
/// rewritten files take the starting sequence number, which no earlier delete applies to, and
/// paths no delete names. A candidate no longer live in `head` is not removed (again).
pub(super) fn dangling_deletes<'c>(
    head: &[DataFile],
    replaced: &HashSet<&str>,
    candidates: &'c [Candidate],
) -> Vec<&'c Candidate> {
    let live: HashSet<(&str, Option<i64>)> = head.iter().map(DataFile::entry).collect();
    let data: Vec<&DataFile> =
        head.iter().filter(|f| f.content == FileContent::Data && !replaced.contains(f.path.as_str())).collect();
    candidates
        .iter()
        .filter(|c| live.contains(&c.file.entry()))
        .filter(|c| {
            !data.iter().any(|d| {
                c.file.applies_to(d) && c.targets.as_ref().is_none_or(|named| named.contains(&location_key(&d.path)))
            })
        })
        .collect()
}
