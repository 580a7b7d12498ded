//! The Iceberg commit of a rewrite: one `replace` snapshot (the replaced data files DELETED, the
//! new ones ADDED with the starting sequence number, dangling delete files removed), retried on a
//! moved head while the rewrite is still valid there (`commit_with_retries`).

use std::collections::{BTreeMap, HashMap, HashSet};

use ::iceberg::spec::{DataContentType, DataFile as IcebergDataFile, ManifestContentType, Operation, TableMetadata};

use super::run::Committed;
use crate::error::{Error, ErrorKind, Result};
use crate::interrupt;
use crate::interrupt::pause_for_tests;
use crate::runtime;
use crate::store::location_key;
use crate::table::iceberg::commit::{CommitOutcome, commit_table, relocate, snapshot_landed};
use crate::table::iceberg::history::descends_from;
use crate::table::iceberg::snapshot_builder::SnapshotBuilder;
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
    crate::store::sync_local(written.iter().filter(|w| w.data_file.is_some()).map(|w| w.local_path.as_str()))?;
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
            crate::store::sync_local(scratch.iter().map(String::as_str))?;
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
    runtime::block_on(async {
        let mut snapshot = SnapshotBuilder::new(&base.table, scratch);
        let mut tally = Tally::default();
        carry_manifests(&mut snapshot, base, replaced, removing, &mut tally).await?;
        if tally.found != replaced.len() || tally.removed_deletes_found != removing.len() {
            return Err(Error::new(
                ErrorKind::CorruptMetadata,
                format!(
                    "{} of the files to replace or remove are not live in the base snapshot",
                    replaced.len() + removing.len() - tally.found - tally.removed_deletes_found
                ),
            ));
        }
        // One manifest of added files per partition spec.
        let added = written.iter().filter_map(|w| w.data_file.as_ref().map(|f| (w.spec_id, f)));
        for (_, file) in added.clone() {
            tally.added_files += 1;
            tally.added_records += file.record_count();
            tally.added_bytes += file.file_size_in_bytes();
        }
        let added = added.map(|(spec_id, file)| (spec_id, file.clone(), starting_sequence_number));
        snapshot.add_files(ManifestContentType::Data, "m1", added).await?;
        tally.total_files += tally.added_files;
        tally.total_records += tally.added_records;
        tally.total_bytes += tally.added_bytes;
        snapshot.finish(Operation::Replace, tally.summary(!removing.is_empty()), base.add_order.as_ref()).await
    })?
}

/// The figures of a compaction's snapshot, counted as its manifests are carried or rewritten.
#[derive(Default)]
struct Tally {
    /// Replaced data files found live.
    found: usize,
    deleted_files: u64,
    deleted_records: u64,
    removed_bytes: u64,
    added_files: u64,
    added_records: u64,
    added_bytes: u64,
    total_files: u64,
    total_records: u64,
    total_bytes: u64,
    total_deletes: u64,
    /// Removed delete files: (files, deletes in them) per kind.
    removed_position: (u64, u64),
    removed_equality: (u64, u64),
    removed_deletes_found: usize,
}

impl Tally {
    /// A live data file kept.
    fn keep(&mut self, e: &::iceberg::spec::ManifestEntry) {
        self.total_files += 1;
        self.total_records += e.record_count();
        self.total_bytes += e.file_size_in_bytes();
    }

    /// A live data file replaced.
    fn replace(&mut self, e: &::iceberg::spec::ManifestEntry) {
        self.found += 1;
        self.deleted_files += 1;
        self.deleted_records += e.record_count();
        self.removed_bytes += e.file_size_in_bytes();
    }

    /// A live delete file removed.
    fn remove_delete(&mut self, e: &::iceberg::spec::ManifestEntry) {
        self.removed_deletes_found += 1;
        let slot = match e.content_type() {
            DataContentType::EqualityDeletes => &mut self.removed_equality,
            _ => &mut self.removed_position,
        };
        slot.0 += 1;
        slot.1 += e.record_count();
    }

    /// The snapshot's summary properties (`removed_deletes`: it removes delete files).
    fn summary(&self, removed_deletes: bool) -> HashMap<String, String> {
        let mut properties = HashMap::from([
            ("added-data-files".to_string(), self.added_files.to_string()),
            ("deleted-data-files".to_string(), self.deleted_files.to_string()),
            ("added-records".to_string(), self.added_records.to_string()),
            ("deleted-records".to_string(), self.deleted_records.to_string()),
            ("added-files-size".to_string(), self.added_bytes.to_string()),
            ("removed-files-size".to_string(), self.removed_bytes.to_string()),
            ("total-data-files".to_string(), self.total_files.to_string()),
            ("total-records".to_string(), self.total_records.to_string()),
            ("total-files-size".to_string(), self.total_bytes.to_string()),
            ("total-delete-files".to_string(), self.total_deletes.to_string()),
        ]);
        if removed_deletes {
            let (position, equality) = (self.removed_position, self.removed_equality);
            properties.extend([
                ("removed-delete-files".to_string(), (position.0 + equality.0).to_string()),
                ("removed-position-delete-files".to_string(), position.0.to_string()),
                ("removed-equality-delete-files".to_string(), equality.0.to_string()),
                ("removed-position-deletes".to_string(), position.1.to_string()),
                ("removed-equality-deletes".to_string(), equality.1.to_string()),
            ]);
        }
        properties
    }
}

/// Names `base`'s manifests in the new snapshot: each as it is when it holds no replaced or
/// removed file; rewritten without them when it holds some; a data manifest every live file of
/// which is replaced goes, with the others of its partition spec, into one manifest of DELETED
/// entries; manifests with no live entry are left out. Counts into `tally`.
async fn carry_manifests(
    snapshot: &mut SnapshotBuilder<'_>,
    base: &Base,
    replaced: &HashSet<&str>,
    removing: &HashSet<(&str, Option<i64>)>,
    tally: &mut Tally,
) -> Result<()> {
    let removes =
        |e: &::iceberg::spec::ManifestEntry| removing.contains(&(e.file_path(), e.data_file().content_offset()));
    let drops = |e: &::iceberg::spec::ManifestEntry| replaced.contains(e.file_path());
    // Data manifests every live file of which is replaced, per partition spec: their entries
    // go DELETED into one manifest per spec, not one manifest each.
    let mut emptied: BTreeMap<i32, Vec<&LoadedManifest>> = BTreeMap::new();
    for loaded in &base.manifests {
        let alive: Vec<_> = loaded.manifest.entries().iter().filter(|e| e.is_alive()).collect();
        // A manifest left with no live entry by an earlier snapshot (only the files that
        // snapshot removed) is not carried into this one, as Java's snapshot producers keep
        // only manifests with added or existing files or written by the committing snapshot.
        if alive.is_empty() {
            continue;
        }
        if loaded.file.content == ManifestContentType::Deletes {
            if !alive.iter().any(|e| removes(e)) {
                tally.total_deletes += alive.len() as u64;
                snapshot.keep(with_counts(loaded));
                continue;
            }
            let seen = |e: &::iceberg::spec::ManifestEntry, dropped: bool| {
                if dropped { tally.remove_delete(e) } else { tally.total_deletes += 1 }
            };
            snapshot.rewrite_dropping(&[loaded], "m2", removes, seen).await?;
        } else if !alive.iter().any(|e| drops(e)) {
            alive.iter().for_each(|e| tally.keep(e));
            snapshot.keep(with_counts(loaded));
        } else if alive.iter().all(|e| drops(e)) {
            alive.iter().for_each(|e| tally.replace(e));
            emptied.entry(loaded.file.partition_spec_id).or_default().push(loaded);
        } else {
            let seen = |e: &::iceberg::spec::ManifestEntry, dropped: bool| {
                if dropped { tally.replace(e) } else { tally.keep(e) }
            };
            snapshot.rewrite_dropping(&[loaded], "m0", drops, seen).await?;
        }
    }
    for group in emptied.values() {
        snapshot.rewrite_dropping(group, "m0", |_| true, |_, _| {}).await?;
    }
    for carried in base.carried.iter().filter(|c| c.has_live_entries()) {
        tally.total_files += carried.files;
        tally.total_records += carried.records;
        tally.total_bytes += carried.bytes;
        snapshot.keep(carried.file.clone());
    }
    Ok(())
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
