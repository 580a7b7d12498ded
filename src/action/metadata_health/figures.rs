//! What metadata health measures ([`MetadataHealth`]), against what ([`HealthOptions`]), and the
//! verdicts read from it.

use crate::action::blocked::Blocked;
use crate::action::expire_snapshots::ExpiryOptions;
use crate::table::TableFormat;

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
    /// told apart safely, or, for Delta, when VACUUM is blocked).
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
    /// What maintenance the table blocks, and why.
    pub blocked: Blocked,
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
    /// Files VACUUM with the table's retention would delete, and their bytes (`None` when VACUUM
    /// is blocked: `MetadataHealth::blocked`).
    pub vacuumable_files: Option<u64>,
    /// See `vacuumable_files`.
    pub vacuumable_bytes: Option<u64>,
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
