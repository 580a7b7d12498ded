//! The OPTIMIZE commit of a Delta rewrite ([`crate::action::compact::delta`]): removes and adds
//! with `dataChange: false` through delta-rs's `CommitBuilder`, put-if-absent on
//! `_delta_log/<v>.json`.
//!
//! - A concurrent commit is settled as Spark settles one for OPTIMIZE, which reads only the files
//!   it rewrites (`check_rebase`): an append, or a DELETE on other files, passes; a removal of
//!   one of our inputs, a new deletion vector on one, or a protocol/metadata change fails ours.
//! - A commit whose actions depend on its version (row tracking, in-commit timestamps) is pinned
//!   to the version after the one read.
//! - Post-commit: a checkpoint every `delta.checkpointInterval` commits and the expired-log
//!   cleanup per `delta.enableExpiredLogCleanup` / `delta.logRetentionDuration`, as any Delta
//!   writer does — but neither on a table whose checkpoints are v2 or protected.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use deltalake_core::kernel::transaction::{CommitBuilder, CommitProperties};
use deltalake_core::kernel::{Action, Add};
use deltalake_core::protocol::DeltaOperation;
use serde_json::{Value, json};

use crate::error::{Error, ErrorKind, Result};
use crate::table::PartitionKey;
use crate::table::delta::commit::{CompactionView, UriPathLogStore};
use crate::table::delta::{DeltaLakeTable, LiveFile, delta_error};

/// Whether the table's checkpoints are ones this commit must not write or clean up: v2
/// checkpoints (with sidecars; delta-rs writes classic ones) and protected checkpoints.
fn keeps_checkpoints_alone(table: &DeltaLakeTable) -> bool {
    let features = table.features("writerFeatures");
    features.iter().any(|f| f == "v2Checkpoint" || f == "checkpointProtection")
        || table.property("delta.checkpointPolicy").is_some_and(|p| p == "v2")
}

/// A file the rewrite wrote, and what it replaces.
pub(crate) struct Written {
    /// Where it is.
    pub(super) local_path: PathBuf,
    /// Its add action (row-tracking fields set at commit).
    pub(super) add: Add,
    /// Its rows.
    pub(super) rows: u64,
    /// The live files it replaces (on the first file of a group).
    pub(super) replaces: Vec<deltalake_core::kernel::Remove>,
    /// The partition rewritten (set once the rewrite is done).
    pub(super) key: Option<PartitionKey>,
}

/// The `commitInfo` key that marks a commit as this rewrite's (a fresh id per commit), so that a
/// commit whose answer was lost can be recognized in the log.
const COMMIT_ID_KEY: &str = "lakehouse.commitId";

/// Commits the rewrite: one OPTIMIZE commit of removes and adds (dataChange false). Returns the
/// version, and a warning when a step after the commit point failed (delta-rs's post-commit
/// checkpoint or log cleanup): the version is committed all the same, and an error here would
/// make the caller delete the files it adds.
///
/// The commit point is the creation of `_delta_log/<v>.json`. When delta-rs reports a failure
/// other than a clean conflict — or a conflict that could be with itself: an object store's
/// retry of a conditional write that had landed answers "already exists" — the log after the
/// version read is searched for this commit's id ([`COMMIT_ID_KEY`]): found, it is committed;
/// not found on a local disk, it is not; not found on object storage after a transport error,
/// the outcome is unknown and every file is kept.
///
/// A conflict is settled as Spark settles one for OPTIMIZE, which reads only the files it
/// rewrites: the table is read again, and when every input is still live with the very deletion
/// vector it was read with, and neither protocol nor metadata changed, the rewrite still holds
/// exactly those rows and is committed on the newer version ([`check_rebase`]); otherwise it
/// fails as a conflict. (delta-rs built without DataFusion takes every live file as read, so any
/// concurrent DELETE anywhere in the table would abort the rewrite.) `moved`: an earlier batch
/// of this rewrite committed ([`super::progress`]), so the first attempt is on the latest
/// version too, once checked the same way.
pub(super) fn commit(
    table: &DeltaLakeTable,
    target_size: i64,
    written: &[Written],
    moved: bool,
) -> Result<(i64, Option<String>)> {
    let commit_id = uuid::Uuid::new_v4().to_string();
    // The latest version, once the rewrite is checked to still hold there (`conflict`: what
    // made the last attempt fail, for the message).
    let rebased = |conflict: Option<&str>| -> Result<DeltaLakeTable> {
        let latest = DeltaLakeTable::load(&table.root)?;
        check_rebase(table, &latest, written).map_err(|why| {
            let why = conflict.map_or(why.clone(), |c| format!("{why}; {c}"));
            Error::conflict(format!(
                "another writer changed Delta table '{}' ({why}); nothing was committed",
                table.root.display()
            ))
        })?;
        Ok(latest)
    };
    let mut newer: Option<DeltaLakeTable> = if moved { Some(rebased(None)?) } else { None };
    for _ in 0..MAX_REBASES {
        let base = newer.as_ref().unwrap_or(table);
        match commit_on(base, target_size, written, &commit_id)? {
            Ok(done) => return Ok(done),
            Err(conflict) => newer = Some(rebased(Some(&conflict))?),
        }
    }
    Err(Error::conflict(format!(
        "Delta table '{}' kept changing while this rewrite committed ({MAX_REBASES} attempts); nothing was committed",
        table.root.display()
    )))
}

/// Whether the table's commits carry in-commit timestamps (`delta.enableInCommitTimestamps`).
fn in_commit_timestamps(table: &DeltaLakeTable) -> bool {
    table.property("delta.enableInCommitTimestamps").is_some_and(|v| v.eq_ignore_ascii_case("true"))
}

/// The in-commit timestamp of the version after `table`'s: now, but after the version read's own
/// (its `commitInfo.inCommitTimestamp`; its `timestamp` when it predates the feature), as the
/// protocol asks timestamps to increase.
fn next_in_commit_timestamp(table: &DeltaLakeTable) -> Result<i64> {
    let path = table.log_dir().join(format!("{:020}.json", table.version));
    let location = path.to_string_lossy().into_owned();
    let text = crate::table::delta::read_log_file(&path)?;
    let previous = text
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find_map(|action| {
            let info = action.get("commitInfo")?;
            info.get("inCommitTimestamp").or_else(|| info.get("timestamp"))?.as_i64()
        })
        .ok_or_else(|| {
            Error::new(
                ErrorKind::CorruptMetadata,
                format!(
                    "'{location}' has no commitInfo timestamp, which in-commit timestamps need; nothing was committed"
                ),
            )
        })?;
    Ok(chrono::Utc::now().timestamp_millis().max(previous + 1))
}

/// How often a conflicting commit is retried on a newer version ([`commit`]).
const MAX_REBASES: usize = 5;

/// delta-rs's own retries of a commit that is not pinned to a version (its default).
const DEFAULT_MAX_RETRIES: usize = 15;

/// Why the rewrite cannot be committed on `latest` in place of `read` (the version it read):
/// an input is gone or has another deletion vector, or the protocol or metadata changed.
fn check_rebase(
    read: &DeltaLakeTable,
    latest: &DeltaLakeTable,
    written: &[Written],
) -> std::result::Result<(), String> {
    if latest.protocol != read.protocol {
        return Err("the protocol changed".into());
    }
    if latest.metadata != read.metadata {
        return Err("the schema, partitioning or properties changed".into());
    }
    let live: HashMap<&str, &LiveFile> = latest.files.iter().map(|f| (f.path.as_str(), f)).collect();
    for input in written.iter().flat_map(|w| &w.replaces) {
        match live.get(input.path.as_str()) {
            None => return Err(format!("'{}', an input of this rewrite, was removed", input.path)),
            Some(f) if f.remove.deletion_vector != input.deletion_vector => {
                return Err(format!("rows of '{}', an input of this rewrite, were deleted", input.path));
            }
            Some(f) if f.remove.base_row_id != input.base_row_id => {
                return Err(format!("the row ids of '{}', an input of this rewrite, changed", input.path));
            }
            Some(_) => {}
        }
    }
    Ok(())
}

/// One commit attempt on `table`'s version: `Ok(Err(conflict))` when another writer's commit
/// stands in the way and nothing of ours was committed.
fn commit_on(
    table: &DeltaLakeTable,
    target_size: i64,
    written: &[Written],
    commit_id: &str,
) -> Result<std::result::Result<(i64, Option<String>), String>> {
    // Under row tracking the commit is pinned to the next version: its adds' fresh baseRowIds lie
    // above this version's high-water mark, which it raises, and their defaultRowCommitVersion is
    // that version. (Every row a rewrite wrote has its id and version materialized.) With
    // in-commit timestamps too: its timestamp must follow this version's.
    let row_ids = table.row_tracking.as_ref().map(|t| t.high_water_mark.unwrap_or(-1));
    let in_commit_timestamp = match in_commit_timestamps(table) {
        true => Some(next_in_commit_timestamp(table)?),
        false => None,
    };
    let pinned = (row_ids.is_some() || in_commit_timestamp.is_some()).then_some(table.version + 1);
    let (actions, removed) = actions_of(written, pinned, row_ids);
    let metrics = json!({
        "numFilesAdded": written.len(),
        "numFilesRemoved": removed,
        "numBytesAdded": written.iter().map(|w| w.add.size).sum::<i64>(),
        "numBytesRemoved": written.iter().flat_map(|w| &w.replaces).map(|r| r.size.unwrap_or(0)).sum::<i64>(),
    });
    let properties = CommitProperties::default()
        .with_metadata(
            [
                ("operationMetrics".to_string(), metrics),
                ("readVersion".to_string(), json!(table.version)),
                ("isolationLevel".to_string(), json!("SnapshotIsolation")),
                ("isBlindAppend".to_string(), json!(false)),
                ("clientVersion".to_string(), json!(engine())),
                (COMMIT_ID_KEY.to_string(), json!(commit_id)),
            ]
            .into_iter()
            .chain(row_ids.map(|_| ("tags".to_string(), json!({"delta.rowTracking.preserved": "true"}))))
            .chain(in_commit_timestamp.map(|t| ("inCommitTimestamp".to_string(), json!(t)))),
        )
        // Pinned: one attempt, at that version only (a retry is ours, on a newer version).
        .with_max_retries(if pinned.is_some() { 0 } else { DEFAULT_MAX_RETRIES })
        // As a Delta writer: a checkpoint every delta.checkpointInterval commits, expired logs
        // cleaned per the table's delta.enableExpiredLogCleanup and logRetentionDuration — but
        // neither on a table whose checkpoints are v2 or protected: a later writer that knows
        // them checkpoints it.
        .with_create_checkpoint(!keeps_checkpoints_alone(table))
        .with_cleanup_expired_logs(keeps_checkpoints_alone(table).then_some(false));
    let state = table.table.snapshot().map_err(|e| delta_error(&table.root, e))?;
    // delta-rs's protocol check sees the table without the features a rewrite keeps by
    // construction, and its commit file gets URI-encoded paths (see table::delta::commit).
    let view = CompactionView::new(state)
        .map_err(|e| Error::invalid(format!("Delta table '{}': unreadable protocol: {e}", table.root.display())))?;
    let log_store = UriPathLogStore::wrap_at(table.table.log_store(), pinned.map(|v| v as u64));
    let stage = crate::runtime::block_on(async {
        let prepared = CommitBuilder::from(properties)
            .with_actions(actions)
            .build(Some(&view), log_store, DeltaOperation::Optimize { predicate: None, target_size })
            .into_prepared_commit_future()
            .await;
        let prepared = match prepared {
            Ok(prepared) => prepared,
            Err(e) => return CommitStage::NotCommitted(e),
        };
        let post_commit = match prepared.await {
            Ok(post_commit) => post_commit,
            Err(e) => return CommitStage::Unconfirmed(e),
        };
        let version = post_commit.version;
        match post_commit.await {
            Ok(finalized) => CommitStage::Committed(finalized.version(), None),
            Err(e) => CommitStage::Committed(version, Some(e)),
        }
    })?;
    settle(table, stage, commit_id)
}

/// The actions of a commit of `written`: each replaced file's `remove` (no data change) and each
/// new file's `add`; under row tracking (`row_ids`: the version's high-water mark) on the
/// `pinned` version, the adds get fresh `baseRowId`s above the mark, which the row tracking
/// domain then raises. Returns them with the count of removes.
fn actions_of(written: &[Written], pinned: Option<i64>, row_ids: Option<i64>) -> (Vec<Action>, usize) {
    let mut actions: Vec<Action> = Vec::new();
    let mut removed = 0usize;
    let mut next_row_id = row_ids.map_or(0, |mark| mark + 1);
    for w in written {
        for remove in &w.replaces {
            let mut remove = remove.clone();
            remove.data_change = false;
            remove.deletion_timestamp = Some(chrono::Utc::now().timestamp_millis());
            actions.push(Action::Remove(remove));
            removed += 1;
        }
        let mut add = w.add.clone();
        if let (Some(version), Some(_)) = (pinned, row_ids) {
            add.base_row_id = Some(next_row_id);
            add.default_row_commit_version = Some(version);
            next_row_id += w.rows as i64;
        }
        actions.push(Action::Add(add));
    }
    if row_ids.is_some() {
        actions.push(Action::DomainMetadata(deltalake_core::kernel::DomainMetadata {
            domain: crate::table::delta::row_tracking::DOMAIN.to_string(),
            configuration: json!({"rowIdHighWaterMark": next_row_id - 1}).to_string(),
            removed: false,
        }));
    }
    (actions, removed)
}

/// What a commit attempt on `table`'s version came to (`stage`): the version committed, with a
/// warning when only its post-commit work failed; `Ok(Err(conflict))`; or, unconfirmed, the
/// log searched for our `commit_id`.
fn settle(
    table: &DeltaLakeTable,
    stage: CommitStage,
    commit_id: &str,
) -> Result<std::result::Result<(i64, Option<String>), String>> {
    match stage {
        CommitStage::Committed(version, post_commit_error) => Ok(Ok((
            version as i64,
            post_commit_error.map(|e| {
                format!(
                    "committed version {version}, but the post-commit checkpoint or log cleanup failed ({e}); the \
                 table is consistent and a later commit writes the checkpoint"
                )
            }),
        ))),
        CommitStage::NotCommitted(e) if is_conflict(&e) => Ok(Err(e.to_string())),
        CommitStage::NotCommitted(e) => Err(commit_error(&table.root, e)),
        CommitStage::Unconfirmed(e) => {
            let unknown = |why: String| {
                Error::new(
                    ErrorKind::CommitUnknown,
                    format!(
                        "Delta table '{}': the commit was not confirmed ({e}) and {why}; the rewritten files were \
                     left in place (VACUUM removes them once nothing references them); run again to compact",
                        table.root.display()
                    ),
                )
            };
            match crate::table::delta::commit::find_commit(&table.table, table.version, COMMIT_ID_KEY, commit_id) {
                Ok(Some(version)) => Ok(Ok((version, None))),
                Ok(None) if is_conflict(&e) => Ok(Err(e.to_string())),
                Ok(None) if crate::store::local_path(&table.root.to_string_lossy()).is_some() => {
                    Err(commit_error(&table.root, e))
                }
                Ok(None) => Err(unknown("the log does not show it yet".into())),
                Err(search) => Err(unknown(format!("the log could not be searched for it: {}", search.message()))),
            }
        }
    }
}

/// How far a Delta commit got ([`commit`]).
enum CommitStage {
    /// Failed before anything was written to the log.
    NotCommitted(deltalake_core::DeltaTableError),
    /// The write of the log entry failed or was refused: committed or not, the log tells.
    Unconfirmed(deltalake_core::DeltaTableError),
    /// The log entry exists (this version); the post-commit steps failed when the error is set.
    Committed(u64, Option<deltalake_core::DeltaTableError>),
}

/// Who wrote the commit (`clientVersion`; delta-rs fills `engineInfo` with its own version).
fn engine() -> String {
    format!("lakehouse/{} (DuckDB rewrite, delta-rs commit)", env!("CARGO_PKG_VERSION"))
}

/// Whether delta-rs gave up because of another writer (a conflict, or the version taken).
fn is_conflict(e: &deltalake_core::DeltaTableError) -> bool {
    use deltalake_core::kernel::transaction::TransactionError as T;
    match e {
        deltalake_core::DeltaTableError::Transaction { source } => {
            matches!(source, T::CommitConflict(_) | T::VersionAlreadyExists(_) | T::MaxCommitAttempts(_))
        }
        deltalake_core::DeltaTableError::VersionAlreadyExists(_) => true,
        _ => false,
    }
}

/// A failed commit as ours: a conflict with another writer is [`ErrorKind::CommitConflict`].
fn commit_error(root: &Path, e: deltalake_core::DeltaTableError) -> Error {
    let text = e.to_string();
    if is_conflict(&e) {
        return Error::conflict(format!(
            "another writer changed Delta table '{}' in a way this rewrite cannot be committed on ({text}); \
             nothing was committed",
            root.display()
        ));
    }
    delta_error(root, e)
}
