//! Metadata health: the figures that say whether a table's metadata is bloated — snapshots past
//! retention, manifests, metadata.json versions, delete files and orphan files.
//!
//! The verdict is actionable: `requires_expiry` when [`crate::action::expire_snapshots`] would expire
//! something, `requires_orphan_cleanup` when [`crate::action::remove_orphan_files`] would delete something;
//! `metadata_bloated` is either, with the reasons spelled out.

use std::collections::HashSet;
use std::path::PathBuf;

use crate::action::expire_snapshots::{ExpiryOptions, retention_days_in_force, select};
use crate::action::remove_orphan_files::find_orphans;
use crate::action::vacuum;
use crate::duck::HostDb;
use crate::error::Result;
use crate::error::{Error, ErrorKind};
use crate::profile::MIB;
use crate::report::trim_number;
use crate::store::location_key;
use crate::table::delta::{DeltaLakeTable, LogFile};
use crate::table::iceberg::IcebergTable;
use crate::table::iceberg::reach::Reach;
use crate::table::{self, FileContent, LocateOptions, Table, TableFormat};

/// A manifest is small below this share of `commit.manifest.target-size-bytes` (the same
/// half-of-target rule as data files: 64 MiB of 128 MiB).
const SMALL_MANIFEST_SHARE: f64 = 0.5;
const DEFAULT_MANIFEST_TARGET_BYTES: u64 = 8 * 1024 * 1024;

/// What to measure against.
#[derive(Debug, Clone, PartialEq)]
pub struct HealthOptions {
    /// Retention and retain-last, as the expiry would use them.
    pub expiry: ExpiryOptions,
    /// The orphan safety window.
    pub older_than_days: f64,
}

/// The figures.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MetadataHealth {
    /// Snapshots in the metadata.
    pub snapshots: u64,
    /// Oldest and newest snapshot timestamps.
    pub oldest_snapshot_ms: Option<i64>,
    /// See `oldest_snapshot_ms`.
    pub newest_snapshot_ms: Option<i64>,
    /// The retention in force (parameter, table property, or 7 days).
    pub retention_days: f64,
    /// Snapshots older than the retention.
    pub snapshots_past_retention: u64,
    /// Snapshots an expiry would remove now (past retention, minus refs' heads and retain_last).
    pub expirable_snapshots: u64,
    /// Branches and tags.
    pub refs: u64,
    /// Manifests of the current snapshot, and how many are small.
    pub manifests: u64,
    /// See `manifests`.
    pub small_manifests: u64,
    /// Bytes of the current snapshot's manifests.
    pub manifest_bytes: u64,
    /// `*.metadata.json` files in the metadata directory (Delta: commit and checkpoint files in
    /// `_delta_log/`), and their bytes.
    pub metadata_files: u64,
    /// See `metadata_files`.
    pub metadata_bytes: u64,
    /// Entries of the metadata log.
    pub metadata_log_entries: u64,
    /// Metadata files in the metadata directory that neither the current metadata nor its log
    /// names: commits dropped them from the log, and (as in Java) they are deleted only when
    /// `write.metadata.delete-after-commit.enabled` is true; orphan removal finds them.
    pub unlogged_metadata_files: u64,
    /// Live data files and delete files of the current snapshot.
    pub data_files: u64,
    /// See `data_files`.
    pub position_delete_files: u64,
    /// See `data_files`.
    pub equality_delete_files: u64,
    /// Orphan files and bytes (`None` when referenced metadata is missing, so orphans cannot be
    /// told apart safely).
    pub orphan_files: Option<u64>,
    /// See `orphan_files`.
    pub orphan_bytes: Option<u64>,
    /// Referenced manifest lists or manifests that no longer exist.
    pub missing_metadata_files: u64,
    /// Why the metadata is bloated (empty: healthy).
    pub reasons: Vec<String>,
    /// The table's format.
    pub format: Option<TableFormat>,
    /// Delta Lake's log figures (`None` for Iceberg).
    pub delta: Option<DeltaLogHealth>,
}

/// The figures of a Delta table's `_delta_log` and of what VACUUM would do.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeltaLogHealth {
    /// Commits after the newest checkpoint (all of them without one).
    pub commits_since_checkpoint: u64,
    /// The newest checkpoint's version.
    pub last_checkpoint_version: Option<i64>,
    /// Its age in days (from the checkpoint file's modification time).
    pub checkpoint_age_days: Option<f64>,
    /// `delta.checkpointInterval` (default 100).
    pub checkpoint_interval: u64,
    /// `delta.logRetentionDuration` in days (default 30).
    pub log_retention_days: f64,
    /// `delta.deletedFileRetentionDuration` in hours (default 168).
    pub deleted_file_retention_hours: f64,
    /// Remove actions the log still holds for files gone from the table.
    pub tombstones: u64,
    /// Of those, removed longer ago than the deleted-file retention.
    pub expired_tombstones: u64,
    /// Files VACUUM with the table's retention would delete, and their bytes.
    pub vacuumable_files: u64,
    /// See `vacuumable_files`.
    pub vacuumable_bytes: u64,
}

impl MetadataHealth {
    /// Whether an expiry would remove snapshots.
    pub fn requires_expiry(&self) -> bool {
        self.expirable_snapshots > 0
    }

    /// Whether an orphan cleanup would remove files.
    pub fn requires_orphan_cleanup(&self) -> bool {
        self.orphan_files.unwrap_or(0) > 0
    }

    /// Whether maintenance would slim the metadata down.
    pub fn metadata_bloated(&self) -> bool {
        !self.reasons.is_empty()
    }
}

/// Opens `table_name` (Iceberg or Delta) and measures its metadata.
pub fn metadata_health(
    table_name: &str,
    locate: &LocateOptions,
    options: &HealthOptions,
    host: &HostDb,
) -> Result<MetadataHealth> {
    options.expiry.validate()?;
    match Table::open(table_name, locate)? {
        Table::Iceberg { table, .. } => measure(&table, options),
        Table::Delta(table) => measure_delta(&table, host),
    }
}

/// Measures `table`'s metadata.
pub fn measure(table: &IcebergTable, options: &HealthOptions) -> Result<MetadataHealth> {
    let metadata = table.metadata.as_ref();
    let now_ms = chrono::Utc::now().timestamp_millis();
    let mut h = MetadataHealth {
        snapshots: metadata.snapshots().len() as u64,
        refs: refs_count(metadata),
        metadata_log_entries: metadata.metadata_log().len() as u64,
        ..Default::default()
    };
    h.oldest_snapshot_ms = metadata.snapshots().map(|s| s.timestamp_ms()).min();
    h.newest_snapshot_ms = metadata.snapshots().map(|s| s.timestamp_ms()).max();
    h.retention_days = retention_days_in_force(metadata, &options.expiry);
    let cutoff_ms = now_ms - (h.retention_days * 86_400_000.0) as i64;
    h.snapshots_past_retention = metadata.snapshots().filter(|s| s.timestamp_ms() < cutoff_ms).count() as u64;
    h.expirable_snapshots = select(table, &options.expiry)?.expired.len() as u64;

    let ids: Vec<i64> = metadata.snapshots().map(|s| s.snapshot_id()).collect();
    let reach = Reach::load(table, &ids, true)?;
    h.missing_metadata_files = reach.missing.len() as u64;
    count_manifests(&mut h, metadata, &reach);
    count_metadata_files(&mut h, table);
    let mut orphans_unknown = None;
    if reach.missing.is_empty() {
        match find_orphans(table, &reach, options.older_than_days) {
            Ok(orphans) => {
                h.orphan_files = Some(orphans.len() as u64);
                h.orphan_bytes = Some(orphans.iter().map(|o| o.size_bytes).sum());
            }
            // Orphans that cannot be told apart are not counted; the figures stay NULL.
            Err(e) if e.kind() == crate::error::ErrorKind::Unsupported => orphans_unknown = Some(e.to_string()),
            Err(e) => return Err(e),
        }
    }

    explain(&mut h, options.older_than_days, orphans_unknown);
    Ok(h)
}

/// The manifests of the current snapshot (how many, their bytes, the small ones) and the live
/// files they list, by content.
fn count_manifests(h: &mut MetadataHealth, metadata: &iceberg::spec::TableMetadata, reach: &Reach) {
    let target = metadata
        .properties()
        .get("commit.manifest.target-size-bytes")
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(DEFAULT_MANIFEST_TARGET_BYTES);
    let small_below = target as f64 * SMALL_MANIFEST_SHARE;
    let current: Vec<&str> =
        metadata.current_snapshot_id().map(|id| reach.manifests_of(id).collect()).unwrap_or_default();
    for path in current {
        let Some(m) = reach.manifests.get(path) else { continue };
        h.manifests += 1;
        h.manifest_bytes += m.length_bytes;
        if (m.length_bytes as f64) < small_below {
            h.small_manifests += 1;
        }
        for f in &m.live {
            match f.content {
                FileContent::Data => h.data_files += 1,
                FileContent::PositionDeletes => h.position_delete_files += 1,
                FileContent::EqualityDeletes => h.equality_delete_files += 1,
            }
        }
    }
}

/// The metadata files in the metadata directory (listed on object storage, read locally), their
/// bytes, and those no longer in the metadata log.
fn count_metadata_files(h: &mut MetadataHealth, table: &IcebergTable) {
    let metadata = table.metadata.as_ref();
    let local_metadata = crate::store::local_path(&table.metadata_location);
    let metadata_dir = |location: &str| location.rsplit_once('/').map(|(d, _)| d.to_string());
    let logged: HashSet<PathBuf> = metadata
        .metadata_log()
        .iter()
        .map(|m| location_key(&m.metadata_file))
        .chain([location_key(&table.metadata_location)])
        .collect();
    if local_metadata.is_none() {
        let logged: HashSet<String> = metadata
            .metadata_log()
            .iter()
            .map(|m| crate::store::canonical(&m.metadata_file))
            .chain([crate::store::canonical(&table.metadata_location)])
            .collect();
        let listed = metadata_dir(&table.metadata_location).map(|d| crate::runtime::block_on(crate::store::list(&d)));
        for o in listed.and_then(|r| r.ok()).and_then(|r| r.ok()).unwrap_or_default() {
            if table::is_metadata_file_name(o.location.rsplit('/').next().unwrap_or_default()) {
                h.metadata_files += 1;
                h.metadata_bytes += o.size_bytes;
                if !logged.contains(&o.location) {
                    h.unlogged_metadata_files += 1;
                }
            }
        }
    } else if let Some(entries) = local_metadata.and_then(metadata_dir).and_then(|d| std::fs::read_dir(d).ok()) {
        for entry in entries.flatten() {
            if table::is_metadata_file_name(&entry.file_name().to_string_lossy()) {
                h.metadata_files += 1;
                h.metadata_bytes += entry.metadata().map_or(0, |m| m.len());
                if !logged.contains(&location_key(&entry.path().to_string_lossy())) {
                    h.unlogged_metadata_files += 1;
                }
            }
        }
    }
}

/// Why an Iceberg table's metadata is bloated (or not measured whole), in `h.reasons`; also its
/// format.
fn explain(h: &mut MetadataHealth, older_than_days: f64, orphans_unknown: Option<String>) {
    if h.requires_expiry() {
        h.reasons.push(format!(
            "{} of {} snapshots past the {}-day retention can be expired",
            h.expirable_snapshots,
            h.snapshots,
            trim_number(h.retention_days)
        ));
    }
    if h.requires_orphan_cleanup() {
        h.reasons.push(format!(
            "{} orphan files ({:.2} MiB) older than {} days",
            h.orphan_files.unwrap_or(0),
            h.orphan_bytes.unwrap_or(0) as f64 / MIB,
            trim_number(older_than_days)
        ));
    }
    if h.unlogged_metadata_files > 0 {
        h.reasons.push(format!(
            "{} metadata files are no longer in the metadata log (kept: write.metadata.delete-after-commit.enabled \
             is not true; orphan removal deletes them)",
            h.unlogged_metadata_files
        ));
    }
    h.format = Some(TableFormat::Iceberg);
    if let Some(why) = orphans_unknown {
        h.reasons.push(format!("orphan files were not counted: {why}"));
    }
    if h.missing_metadata_files > 0 {
        h.reasons.push(format!(
            "{} referenced manifest lists or manifests are missing; orphan files were not counted",
            h.missing_metadata_files
        ));
    }
}

/// Measures a Delta table: its log (commits, checkpoints, retention) and what VACUUM would do.
/// The Iceberg figures map onto Delta's: a commit is a snapshot, the log's files are metadata
/// files, a deletion vector is a position-delete file, and log entries a log cleanup would
/// remove (older than `delta.logRetentionDuration` and before a checkpoint) are expirable.
pub fn measure_delta(table: &DeltaLakeTable, host: &HostDb) -> Result<MetadataHealth> {
    let log_retention_hours = table
        .property("delta.logRetentionDuration")
        .map(|v| {
            vacuum::interval_hours(v).ok_or_else(|| {
                Error::new(ErrorKind::CorruptMetadata, format!("delta.logRetentionDuration '{v}' is not an interval"))
            })
        })
        .transpose()?
        .unwrap_or(30.0 * 24.0);
    let checkpoint_interval =
        table.property("delta.checkpointInterval").and_then(|v| v.parse::<u64>().ok()).unwrap_or(100);
    let now_ms = chrono::Utc::now().timestamp_millis();
    let mut h = MetadataHealth {
        format: Some(TableFormat::Delta),
        retention_days: log_retention_hours / 24.0,
        ..Default::default()
    };
    let mut commits: Vec<(i64, i64)> = Vec::new(); // (version, age ms)
    let mut checkpoints: Vec<(i64, i64)> = Vec::new();
    for entry in table.log_entries()? {
        let age = (now_ms - entry.modified_ms).max(0);
        // The log a reader replays: commits and checkpoints (not checksums, `_last_checkpoint`
        // or temporary files).
        match LogFile::of(&entry.name) {
            Some(LogFile::Commit(version)) => commits.push((version, age)),
            Some(LogFile::Checkpoint { version, .. }) => checkpoints.push((version, age)),
            None => continue,
        }
        h.metadata_files += 1;
        h.metadata_bytes += entry.size_bytes;
    }
    let last_checkpoint = checkpoints.iter().filter(|(v, _)| *v <= table.version).max_by_key(|(v, _)| *v).copied();
    let retention_ms = (log_retention_hours * 3_600_000.0) as i64;
    h.snapshots = commits.len() as u64;
    h.metadata_log_entries = h.snapshots;
    h.oldest_snapshot_ms = commits.iter().map(|(_, age)| now_ms - age).min();
    h.newest_snapshot_ms = commits.iter().map(|(_, age)| now_ms - age).max();
    h.snapshots_past_retention = commits.iter().filter(|(_, age)| *age > retention_ms).count() as u64;
    h.expirable_snapshots =
        commits.iter().filter(|(v, age)| *age > retention_ms && last_checkpoint.is_some_and(|(c, _)| *v < c)).count()
            as u64;
    h.data_files = table.files.len() as u64;
    h.position_delete_files = table.files.iter().filter(|f| f.deletion_vector_rows.is_some()).count() as u64;

    let deleted_file_retention_hours = vacuum::table_retention_hours(table)?;
    let plan = vacuum::vacuum(
        table,
        &vacuum::VacuumOptions { retention_hours: None, dry_run: true, enforce_retention_duration: true, lite: false },
        host,
    )?;
    let tombstone_counts = vacuum::tombstone_counts(table, deleted_file_retention_hours)?;
    let untracked: Vec<&vacuum::VacuumedFile> =
        plan.files.iter().filter(|f| f.reason == vacuum::VacuumReason::Untracked).collect();
    h.orphan_files = Some(untracked.len() as u64);
    h.orphan_bytes = Some(untracked.iter().map(|f| f.deleted.size_bytes).sum());
    let log = DeltaLogHealth {
        commits_since_checkpoint: commits.iter().filter(|(v, _)| last_checkpoint.is_none_or(|(c, _)| *v > c)).count()
            as u64,
        last_checkpoint_version: last_checkpoint.map(|(v, _)| v),
        checkpoint_age_days: last_checkpoint.map(|(_, age)| age as f64 / 86_400_000.0),
        checkpoint_interval,
        log_retention_days: log_retention_hours / 24.0,
        deleted_file_retention_hours,
        tombstones: tombstone_counts.0,
        expired_tombstones: tombstone_counts.1,
        vacuumable_files: plan.removed(),
        vacuumable_bytes: plan.reclaimed_bytes(),
    };
    if h.expirable_snapshots > 0 {
        h.reasons.push(format!(
            "{} of {} log entries are past the {}-day log retention and before checkpoint {} (a log cleanup removes them)",
            h.expirable_snapshots,
            h.snapshots,
            trim_number(log.log_retention_days),
            log.last_checkpoint_version.unwrap_or(0)
        ));
    }
    if log.commits_since_checkpoint > log.checkpoint_interval {
        h.reasons.push(format!(
            "{} commits since the last checkpoint (delta.checkpointInterval {}): readers replay them all",
            log.commits_since_checkpoint, log.checkpoint_interval
        ));
    }
    if log.vacuumable_files > 0 {
        h.reasons.push(format!(
            "{} files ({:.2} MiB) can be vacuumed ({} expired tombstones, {} untracked; retention {} hours)",
            log.vacuumable_files,
            log.vacuumable_bytes as f64 / MIB,
            plan.files.iter().filter(|f| f.reason == vacuum::VacuumReason::Tombstone).count(),
            untracked.len(),
            trim_number(deleted_file_retention_hours)
        ));
    }
    h.delta = Some(log);
    Ok(h)
}

/// Branches and tags (iceberg-rust keeps `refs` private; its serialized form has them).
fn refs_count(metadata: &iceberg::spec::TableMetadata) -> u64 {
    serde_json::to_value(metadata)
        .ok()
        .and_then(|v| v.get("refs").and_then(|r| r.as_object()).map(|r| r.len() as u64))
        .unwrap_or(0)
}
