//! A Delta table's metadata health: its log, checkpoints and what VACUUM would delete.

use super::figures::{DeltaLogHealth, MetadataHealth};
use crate::action::vacuum;
use crate::duck::HostDb;
use crate::error::Result;
use crate::error::{Error, ErrorKind};
use crate::profile::MIB;
use crate::report::trim_number;
use crate::table::TableFormat;
use crate::table::delta::{DeltaLakeTable, LogFile};

/// Measures a Delta table: its log (commits, checkpoints, retention) and what VACUUM would do.
/// The Iceberg figures map onto Delta's: a commit is a snapshot, the log's files are metadata
/// files, a deletion vector is a position-delete file, and log entries a log cleanup would
/// remove (older than `delta.logRetentionDuration` and before a checkpoint) are expirable. When
/// VACUUM is blocked (`vacuum_allowed` false: a feature it does not know), what it would delete is
/// not planned: orphans and vacuumable files are unknown (`None`).
pub fn measure(table: &DeltaLakeTable, vacuum_allowed: bool, host: &HostDb) -> Result<MetadataHealth> {
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
    let plan = vacuum_allowed
        .then(|| {
            let options = vacuum::VacuumOptions {
                retention_hours: None,
                dry_run: true,
                enforce_retention_duration: true,
                lite: false,
            };
            vacuum::vacuum(table, &options, host)
        })
        .transpose()?;
    let tombstone_counts = vacuum::tombstone_counts(table, deleted_file_retention_hours)?;
    let of_reason = |reason| -> Option<Vec<&vacuum::VacuumedFile>> {
        plan.as_ref().map(|p| p.files.iter().filter(|f| f.reason == reason).collect())
    };
    let untracked = of_reason(vacuum::VacuumReason::Untracked);
    h.orphan_files = untracked.as_ref().map(|u| u.len() as u64);
    h.orphan_bytes = untracked.as_ref().map(|u| u.iter().map(|f| f.deleted.size_bytes).sum());
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
        vacuumable_files: plan.as_ref().map(vacuum::VacuumReport::removed),
        vacuumable_bytes: plan.as_ref().map(vacuum::VacuumReport::reclaimed_bytes),
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
    if let (Some(files @ 1..), Some(bytes)) = (log.vacuumable_files, log.vacuumable_bytes) {
        h.reasons.push(format!(
            "{} files ({:.2} MiB) can be vacuumed ({} expired tombstones, {} untracked; retention {} hours)",
            files,
            bytes as f64 / MIB,
            of_reason(vacuum::VacuumReason::Tombstone).map_or(0, |t| t.len()),
            untracked.map_or(0, |u| u.len()),
            trim_number(deleted_file_retention_hours)
        ));
    }
    h.delta = Some(log);
    Ok(h)
}
