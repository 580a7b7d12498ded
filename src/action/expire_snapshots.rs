//! Snapshot expiration: drop snapshots past retention from the metadata, commit, then delete
//! the files only they reached.
//!
//! Selection is iceberg-rust's `ExpireSnapshotsAction` (Java `RemoveSnapshots` semantics): never
//! the current snapshot or the head of a branch or tag, always the newest `retain_last` of each
//! branch's ancestry, per-ref `max-snapshot-age-ms` / `min-snapshots-to-keep`, aged-out refs
//! removed, `gc.enabled = false` refused. Defaults when the caller sets nothing: the table's
//! `history.expire.max-snapshot-age-ms` if set, else 7 days; the table's
//! `history.expire.min-snapshots-to-keep` if set, else 1.
//!
//! Order of work (what makes a crash harmless):
//! 1. compute the new metadata and the files reachable only from expired snapshots
//!    ([`crate::plan::expiry`]) from ALL retained snapshots;
//! 2. commit the new metadata atomically ([`crate::table::iceberg::commit`]); on a conflict, start over
//!    on the new head;
//! 3. only then delete, in parallel, and only inside the table location ([`crate::action::delete_files`]). A crash between 2 and 3
//!    leaves orphans that [`crate::action::remove_orphan_files`] finds later; a file already gone is fine.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use iceberg::spec::{TableMetadata, TableMetadataBuilder, TableProperties};
use iceberg::table::Table;
use iceberg::transaction::{ApplyTransactionAction, Transaction};
use iceberg::{Catalog, Namespace, NamespaceIdent, TableCommit, TableCreation, TableIdent, TableUpdate};

use crate::action::boundary::Boundary;
use crate::action::delete_files::{DeletedFile, delete_files};
use crate::error::{Error, ErrorKind, Result};
use crate::interrupt::pause_for_tests;
use crate::plan::expiry::{Deletion, FileKind, unreachable_files};
use crate::runtime;
use crate::store::location_key;
use crate::table::Located;
use crate::table::iceberg::IcebergTable;
use crate::table::iceberg::commit::{CommitOutcome, commit_table, relocate, require_exclusive};
use crate::table::iceberg::reach::Reach;

/// Commit attempts before giving up on a table that keeps moving.
const MAX_COMMIT_ATTEMPTS: usize = 4;

/// The reference flow's snapshot retention.
pub const DEFAULT_RETENTION_DAYS: f64 = 7.0;

const DAY_MS: f64 = 86_400_000.0;

/// What to expire.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExpiryOptions {
    /// Expire snapshots older than this many days; `None`: the table's
    /// `history.expire.max-snapshot-age-ms`, else [`DEFAULT_RETENTION_DAYS`].
    pub retention_days: Option<f64>,
    /// Keep at least this many snapshots of each branch; `None`: the table's
    /// `history.expire.min-snapshots-to-keep`, else 1.
    pub retain_last: Option<u64>,
    /// Plan only: commit and delete nothing.
    pub dry_run: bool,
    /// Also drop the partition specs and schemas no retained snapshot uses (Java 1.10's
    /// `clean_expired_metadata`; default false, as there): never the default spec or the
    /// current schema.
    pub clean_expired_metadata: bool,
}

impl ExpiryOptions {
    /// Checks ranges.
    pub fn validate(&self) -> Result<()> {
        if let Some(days) = self.retention_days
            && (!days.is_finite() || days < 0.0)
        {
            return Err(Error::invalid(format!("snapshot_retention_days must be a number >= 0, got {days}")));
        }
        if self.retain_last == Some(0) {
            return Err(Error::invalid("retain_last must be at least 1, got 0"));
        }
        Ok(())
    }
}

/// An expired snapshot.
#[derive(Debug, Clone, PartialEq)]
pub struct ExpiredSnapshot {
    /// Its id.
    pub snapshot_id: i64,
    /// When it was committed.
    pub timestamp_ms: i64,
}

/// What an expiry did (or, dry, would do).
#[derive(Debug, Clone, Default)]
pub struct ExpiryReport {
    /// Expired snapshots, oldest first.
    pub expired: Vec<ExpiredSnapshot>,
    /// Branches and tags removed because they aged out.
    pub refs_removed: Vec<String>,
    /// Partition specs and schemas dropped as unused (`clean_expired_metadata`).
    pub unused: UnusedMetadata,
    /// Files deleted (or that would be).
    pub files: Vec<DeletedFile>,
    /// The metadata file committed, if any.
    pub metadata_location: Option<String>,
    /// Snapshots left in the table.
    pub snapshots_retained: u64,
    /// Whether nothing was changed on purpose.
    pub dry_run: bool,
    /// What went wrong after the commit point without undoing it (a version hint not moved).
    pub warning: Option<String>,
}

impl ExpiryReport {
    /// Bytes reclaimed by deletions (or, dry, that would be).
    pub fn reclaimed_bytes(&self) -> u64 {
        self.files.iter().map(DeletedFile::reclaimed_bytes).sum()
    }

    /// Files of `kind` deleted (or that would be).
    pub fn count(&self, kind: FileKind) -> u64 {
        self.files.iter().filter(|f| f.deletion.kind == kind && f.removed()).count() as u64
    }
}

/// The metadata after expiry, and what it drops.
pub struct Selection {
    /// New metadata (not yet committed).
    pub metadata: TableMetadata,
    /// Expired snapshots, oldest first.
    pub expired: Vec<ExpiredSnapshot>,
    /// Aged-out refs removed.
    pub refs_removed: Vec<String>,
    /// Partition specs and schemas no retained snapshot uses, dropped (`clean_expired_metadata`).
    pub unused: UnusedMetadata,
}

impl Selection {
    /// Whether the expiry changes nothing.
    pub fn is_empty(&self) -> bool {
        self.expired.is_empty() && self.refs_removed.is_empty() && self.unused.is_empty()
    }
}

/// Partition specs and schemas an expiry drops because no retained snapshot uses them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UnusedMetadata {
    /// Partition spec ids.
    pub specs: Vec<i32>,
    /// Schema ids.
    pub schemas: Vec<i32>,
}

impl UnusedMetadata {
    /// Whether nothing is dropped.
    pub fn is_empty(&self) -> bool {
        self.specs.is_empty() && self.schemas.is_empty()
    }
}

/// The retention in days in force: the option, else the table's
/// `history.expire.max-snapshot-age-ms`, else [`DEFAULT_RETENTION_DAYS`].
pub fn retention_days_in_force(metadata: &TableMetadata, options: &ExpiryOptions) -> f64 {
    options.retention_days.unwrap_or_else(|| {
        metadata
            .properties()
            .get(TableProperties::PROPERTY_MAX_SNAPSHOT_AGE_MS)
            .and_then(|v| v.parse::<f64>().ok())
            .map_or(DEFAULT_RETENTION_DAYS, |ms| ms / DAY_MS)
    })
}

/// Runs iceberg-rust's snapshot selection on `table` and applies it to a copy of its metadata.
pub fn select(table: &IcebergTable, options: &ExpiryOptions) -> Result<Selection> {
    let base = table.metadata.as_ref();
    let now_ms = chrono::Utc::now().timestamp_millis();
    let table_sets_age = base.properties().contains_key(TableProperties::PROPERTY_MAX_SNAPSHOT_AGE_MS);
    let older_than_ms = match options.retention_days {
        Some(days) => Some(now_ms.saturating_sub((days * DAY_MS) as i64)),
        None if table_sets_age => None,
        None => Some(now_ms.saturating_sub((DEFAULT_RETENTION_DAYS * DAY_MS) as i64)),
    };
    let iceberg_table = Table::builder()
        .metadata(table.metadata.clone())
        .metadata_location(table.metadata_location.clone())
        .identifier(TableIdent::from_strs(["lakehouse", "table"])?)
        .file_io(table.file_io.clone())
        .runtime(runtime::iceberg_runtime()?)
        .build()?;
    let mut action = Transaction::new(&iceberg_table).expire_snapshots();
    if let Some(ms) = older_than_ms {
        action = action.expire_older_than_ms(ms);
    }
    if let Some(n) = options.retain_last {
        action = action.retain_last(usize::try_from(n).unwrap_or(usize::MAX));
    }
    let capture = Capture { table: iceberg_table.clone(), updates: Mutex::new(Vec::new()) };
    let committed = action
        .apply(Transaction::new(&iceberg_table))
        .map(|tx| runtime::block_on(tx.commit(&capture)))
        .map_err(Error::from)
        .and_then(|r| r?.map_err(Error::from));
    if let Err(e) = committed {
        return Err(Error::new(e.kind(), format!("cannot expire snapshots: {}", e.message())));
    }
    let updates = std::mem::take(&mut *capture.updates.lock().map_err(|_| Error::invalid("expiry state poisoned"))?);

    let mut builder = TableMetadataBuilder::new_from_metadata(base.clone(), Some(table.metadata_location.clone()));
    let (mut expired_ids, mut refs_removed) = (Vec::new(), Vec::new());
    for update in updates {
        match &update {
            TableUpdate::RemoveSnapshots { snapshot_ids } => expired_ids.extend(snapshot_ids.iter().copied()),
            TableUpdate::RemoveSnapshotRef { ref_name } => refs_removed.push(ref_name.clone()),
            _ => {}
        }
        builder = update.apply(builder)?;
    }
    let mut expired: Vec<ExpiredSnapshot> = expired_ids
        .iter()
        .filter_map(|id| base.snapshot_by_id(*id))
        .map(|s| ExpiredSnapshot { snapshot_id: s.snapshot_id(), timestamp_ms: s.timestamp_ms() })
        .collect();
    expired.sort_by_key(|s| (s.timestamp_ms, s.snapshot_id));
    let metadata = builder.build()?.metadata;
    let unused = if options.clean_expired_metadata { unused_metadata(table, &metadata)? } else { Default::default() };
    let metadata = if unused.is_empty() {
        metadata
    } else {
        TableMetadataBuilder::new_from_metadata(metadata, Some(table.metadata_location.clone()))
            .remove_partition_specs(&unused.specs)?
            .remove_schemas(&unused.schemas)?
            .build()?
            .metadata
    };
    Ok(Selection { metadata, expired, refs_removed, unused })
}

/// The partition specs and schemas of `metadata` (a table's after expiry) that no retained
/// snapshot uses, as Java's `clean_expired_metadata` finds them: a spec is used by the default
/// spec and by every manifest a retained snapshot lists (read from the manifest lists); a schema
/// by the current schema and the `schema-id` of every retained snapshot. Schemas are kept when a
/// snapshot records none (which schema it was written with is unknown) or when a column type
/// is held by a stand-in (a commit puts those types back by schema).
fn unused_metadata(table: &IcebergTable, metadata: &TableMetadata) -> Result<UnusedMetadata> {
    let mut specs_used: HashSet<i32> = HashSet::from([metadata.default_partition_spec_id()]);
    let mut schemas_used: HashSet<i32> = HashSet::from([metadata.current_schema_id()]);
    let mut every_schema_known = table.stand_ins.is_empty();
    let lists: Vec<String> = metadata.snapshots().map(|s| s.manifest_list().to_string()).collect();
    for snapshot in metadata.snapshots() {
        match snapshot.schema_id() {
            Some(id) => {
                schemas_used.insert(id);
            }
            None => every_schema_known = false,
        }
    }
    runtime::block_on(async {
        for list in &lists {
            for manifest in table.manifest_list_for_reach(list).await? {
                specs_used.insert(manifest.partition_spec_id);
            }
        }
        Ok::<_, Error>(())
    })??;
    let mut specs: Vec<i32> =
        metadata.partition_specs_iter().map(|s| s.spec_id()).filter(|id| !specs_used.contains(id)).collect();
    let mut schemas: Vec<i32> = if every_schema_known {
        metadata.schemas_iter().map(|s| s.schema_id()).filter(|id| !schemas_used.contains(id)).collect()
    } else {
        Vec::new()
    };
    specs.sort_unstable();
    schemas.sort_unstable();
    Ok(UnusedMetadata { specs, schemas })
}

/// Every file the expiry of `selection` frees: manifest lists, manifests, data and delete files
/// reachable only from expired snapshots, their statistics files, and metadata files that fall
/// out of the metadata log.
pub fn files_to_delete(table: &IcebergTable, selection: &Selection, boundary: &Boundary) -> Result<Vec<Deletion>> {
    let base = table.metadata.as_ref();
    let new = &selection.metadata;
    let location = base.location();
    let expired_ids: Vec<i64> = selection.expired.iter().map(|s| s.snapshot_id).collect();
    // Newest first: in an append-only history the newest list alone covers every older manifest.
    let mut retained_ids: Vec<i64> = new.snapshots().map(|s| s.snapshot_id()).collect();
    retained_ids.sort_by_key(|id| std::cmp::Reverse(new.snapshot_by_id(*id).map_or(i64::MIN, |s| s.timestamp_ms())));
    // Manifest lists first; manifests only where needed: those no retained snapshot lists, and
    // the retained ones only when the freed manifests hold live files to check against them
    // (an append-only history frees manifest lists and nothing else). The retained lists are
    // read until they cover every manifest the expired ones name: if they do, nothing but the
    // expired lists is freed; if not, they have all been read.
    let mut expired = Reach::lists(table, &expired_ids, true)?;
    let candidates = expired.manifest_paths();
    let mut retained = Reach::lists_until_covered(table, &retained_ids, false, Some(&candidates))?;
    drop(candidates);
    let kept: HashSet<&str> = retained.manifest_paths();
    let freed: Vec<String> =
        expired.manifest_paths().into_iter().filter(|p| !kept.contains(p)).map(str::to_string).collect();
    drop(kept);
    expired.decode(table, freed.clone(), true)?;
    if freed.iter().any(|p| expired.manifests.get(p).is_some_and(|m| !m.live.is_empty())) {
        let all: Vec<String> = retained.manifest_paths().into_iter().map(str::to_string).collect();
        retained.decode(table, all, false)?;
    }
    let mut files = unreachable_files(&expired, &retained, location)?;
    for file in &mut files {
        file.inside_location = boundary.admits(&file.path);
    }

    // Statistics and metadata files, compared as normalized paths and listed once each.
    let key = location_key;
    let mut seen: HashSet<std::path::PathBuf> = new
        .statistics_iter()
        .map(|s| key(&s.statistics_path))
        .chain(new.partition_statistics_iter().map(|s| key(&s.statistics_path)))
        .chain(new.metadata_log().iter().map(|m| key(&m.metadata_file)))
        .chain([key(&table.metadata_location)])
        .collect();
    let mut add = |kind, path: &str, size: i64, snapshot_id| {
        if seen.insert(key(path)) {
            files.push(Deletion {
                kind,
                path: path.to_string(),
                size_bytes: u64::try_from(size).ok(),
                snapshot_id,
                inside_location: boundary.admits(path),
            });
        }
    };
    for id in &expired_ids {
        if let Some(s) = base.statistics_for_snapshot(*id) {
            add(FileKind::StatisticsFile, &s.statistics_path, s.file_size_in_bytes, Some(*id));
        }
        if let Some(s) = base.partition_statistics_for_snapshot(*id) {
            add(FileKind::StatisticsFile, &s.statistics_path, s.file_size_in_bytes, Some(*id));
        }
    }
    // Metadata files that fall out of the log, only where the table asks for it (Java deletes
    // them on commit only with this property; otherwise orphan removal finds them).
    if deletes_old_metadata(base) {
        for old in base.metadata_log() {
            add(FileKind::MetadataFile, &old.metadata_file, -1, None);
        }
    }
    Ok(files)
}

/// Whether the table's `write.metadata.delete-after-commit.enabled` is true (default false).
pub fn deletes_old_metadata(metadata: &TableMetadata) -> bool {
    metadata
        .properties()
        .get("write.metadata.delete-after-commit.enabled")
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

/// Expires, commits, and deletes (unless `options.dry_run`) on the Iceberg table `located`
/// (re-read on every attempt: a conflict re-plans on the new head).
pub fn expire(located: &Located, options: &ExpiryOptions) -> Result<ExpiryReport> {
    options.validate()?;
    let mut located = located.clone();
    for attempt in 0..MAX_COMMIT_ATTEMPTS {
        let table = IcebergTable::load(&located.metadata_location)?;
        let selection = select(&table, options)?;
        let mut report = ExpiryReport {
            expired: selection.expired.clone(),
            refs_removed: selection.refs_removed.clone(),
            unused: selection.unused.clone(),
            snapshots_retained: selection.metadata.snapshots().len() as u64,
            dry_run: options.dry_run,
            ..Default::default()
        };
        if selection.is_empty() {
            return Ok(report);
        }
        let boundary = Boundary::of(&table);
        let deletions = files_to_delete(&table, &selection, &boundary)?;
        if options.dry_run {
            report.files = delete_files(deletions, true, boundary.real_root());
            report.warning = boundary.refusal().map(str::to_string);
            return Ok(report);
        }
        require_exclusive(&located)?;
        if attempt == 0 {
            pause_for_tests();
        }
        crate::interrupt::check("nothing was expired")?;
        match commit_table(&located, &table, &selection.metadata)? {
            CommitOutcome::Committed { location, warning } => {
                // A catalog that took changes wrote its own metadata, which may reference more.
                let (deletions, kept_warning) = match &located.catalog_table {
                    Some(t) if t.backend.takes_changes() => {
                        keep_what_the_catalog_references(&location, &selection, deletions)
                    }
                    _ => (deletions, None),
                };
                report.metadata_location = Some(location);
                let refused = boundary.refusal().map(str::to_string);
                report.warning =
                    [warning, kept_warning, refused].into_iter().flatten().reduce(|a, b| format!("{a}; {b}"));
                report.files = delete_files(deletions, false, boundary.real_root());
                return Ok(report);
            }
            CommitOutcome::Conflict => located = relocate(&located)?,
            CommitOutcome::Unknown(why) => {
                return Err(Error::new(
                    ErrorKind::CommitUnknown,
                    format!(
                        "the catalog or store did not confirm the expiry ({why}); no file was deleted (a later run, or orphan \
                         removal, deletes what is unreferenced)"
                    ),
                ));
            }
        }
    }
    Err(Error::conflict(format!(
        "the table kept changing; gave up after {MAX_COMMIT_ATTEMPTS} attempts, nothing was expired"
    )))
}

/// `deletions` (planned from the metadata the expiry read) less every file the table as the REST
/// catalog committed it (at `location`) still references, as Java's `RemoveSnapshots` cleans up
/// from the refreshed metadata: a catalog applies our changes to its current metadata, which may
/// hold snapshots another writer committed meanwhile to another branch (a cherry-pick of an
/// expired snapshot, an append on a branch created at one) that reference files the plan freed.
/// What such snapshots reference — manifest lists, manifests, every file their entries name —
/// and the committed metadata's log and statistics files are kept. When the committed metadata
/// or a snapshot's manifests cannot be read, nothing is deleted (orphan removal finds the files
/// later): returned with the warning saying so.
fn keep_what_the_catalog_references(
    location: &str,
    selection: &Selection,
    deletions: Vec<Deletion>,
) -> (Vec<Deletion>, Option<String>) {
    let nothing = |why: String| {
        (Vec::new(), Some(format!("{why}; no file was deleted (orphan removal deletes what is unreferenced)")))
    };
    let committed = match IcebergTable::load(location) {
        Ok(table) => table,
        Err(e) => return nothing(format!("the committed metadata could not be read back ({})", e.message())),
    };
    let planned: HashSet<i64> = selection.metadata.snapshots().map(|s| s.snapshot_id()).collect();
    let others: Vec<i64> =
        committed.metadata.snapshots().map(|s| s.snapshot_id()).filter(|id| !planned.contains(id)).collect();
    let key = location_key;
    let reach = if others.is_empty() {
        Reach::default()
    } else {
        match Reach::load(&committed, &others, false) {
            Ok(reach) => reach,
            Err(e) => {
                return nothing(format!(
                    "the catalog's table holds {} snapshot(s) another writer committed meanwhile, whose files could \
                     not be read ({})",
                    others.len(),
                    e.message()
                ));
            }
        }
    };
    // Conservative here: a file another writer's snapshot names in any entry is kept.
    let referenced: HashSet<std::path::PathBuf> =
        reach.referenced_names(&committed, true).into_iter().map(key).collect();
    let before = deletions.len();
    let kept: Vec<Deletion> = deletions.into_iter().filter(|d| !referenced.contains(&key(&d.path))).collect();
    let spared = before - kept.len();
    let warning = (spared > 0).then(|| {
        format!(
            "{spared} file(s) the expiry freed are referenced by the table as the catalog committed it (a snapshot \
             another writer committed meanwhile, or the catalog's metadata log); they were kept"
        )
    });
    (kept, warning)
}

/// A catalog that serves one table and records the updates a transaction commits instead of
/// committing them: it lets iceberg-rust's `ExpireSnapshotsAction` (reachable only through a
/// transaction) compute its selection, while our own [`commit`] does the atomic swap.
#[derive(Debug)]
struct Capture {
    table: Table,
    updates: Mutex<Vec<TableUpdate>>,
}

fn unsupported<T>() -> iceberg::Result<T> {
    Err(iceberg::Error::new(iceberg::ErrorKind::FeatureUnsupported, "not available in the expiry's capture catalog"))
}

#[async_trait::async_trait]
impl Catalog for Capture {
    async fn list_namespaces(&self, _parent: Option<&NamespaceIdent>) -> iceberg::Result<Vec<NamespaceIdent>> {
        unsupported()
    }
    async fn create_namespace(
        &self,
        _namespace: &NamespaceIdent,
        _properties: HashMap<String, String>,
    ) -> iceberg::Result<Namespace> {
        unsupported()
    }
    async fn get_namespace(&self, _namespace: &NamespaceIdent) -> iceberg::Result<Namespace> {
        unsupported()
    }
    async fn namespace_exists(&self, _namespace: &NamespaceIdent) -> iceberg::Result<bool> {
        unsupported()
    }
    async fn update_namespace(
        &self,
        _namespace: &NamespaceIdent,
        _properties: HashMap<String, String>,
    ) -> iceberg::Result<()> {
        unsupported()
    }
    async fn drop_namespace(&self, _namespace: &NamespaceIdent) -> iceberg::Result<()> {
        unsupported()
    }
    async fn list_tables(&self, _namespace: &NamespaceIdent) -> iceberg::Result<Vec<TableIdent>> {
        unsupported()
    }
    async fn create_table(&self, _namespace: &NamespaceIdent, _creation: TableCreation) -> iceberg::Result<Table> {
        unsupported()
    }
    async fn load_table(&self, _table: &TableIdent) -> iceberg::Result<Table> {
        Ok(self.table.clone())
    }
    async fn drop_table(&self, _table: &TableIdent) -> iceberg::Result<()> {
        unsupported()
    }
    async fn purge_table(&self, _table: &TableIdent) -> iceberg::Result<()> {
        unsupported()
    }
    async fn table_exists(&self, _table: &TableIdent) -> iceberg::Result<bool> {
        Ok(true)
    }
    async fn rename_table(&self, _src: &TableIdent, _dest: &TableIdent) -> iceberg::Result<()> {
        unsupported()
    }
    async fn register_table(&self, _table: &TableIdent, _metadata_location: String) -> iceberg::Result<Table> {
        unsupported()
    }
    async fn update_table(&self, mut commit: TableCommit) -> iceberg::Result<Table> {
        if let Ok(mut updates) = self.updates.lock() {
            *updates = commit.take_updates();
        }
        Ok(self.table.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    #[test]
    fn options_are_validated() {
        assert!(ExpiryOptions::default().validate().is_ok());
        for bad in [
            ExpiryOptions { retention_days: Some(-1.0), ..Default::default() },
            ExpiryOptions { retention_days: Some(f64::INFINITY), ..Default::default() },
            ExpiryOptions { retain_last: Some(0), ..Default::default() },
        ] {
            assert_eq!(bad.validate().unwrap_err().kind(), ErrorKind::InvalidArgument, "{bad:?}");
        }
    }
}
