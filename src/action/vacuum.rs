//! VACUUM of a Delta Lake table: delete the files the current version does not reference and
//! whose retention has passed, as Spark's `VACUUM` (full) does — our own listing, since
//! delta-rs's full mode deletes deletion-vector files live adds still reference and checks only
//! the first path component for hidden names.
//!
//! A file under the table root is deleted when all of these hold:
//! - it is listed: not under `_delta_log/`, and no component of its path (below the root) is
//!   hidden — a name starting with `_` or `.` — except partition directories (`col=…` of a
//!   partition column), `_change_data` and `_delta_index`, as Spark lists them;
//! - it is not valid: not a live file, not a live file's deletion vector, not a file removed
//!   less than the retention ago (an unexpired tombstone, which time travel may read) nor such a
//!   file's deletion vector;
//! - it is an expired tombstone (removed longer than the retention ago, by the remove's
//!   `deletionTimestamp`: the protocol's rule and delta-rs's; Spark also wants an old
//!   modification time, so on a copied table it keeps them), or it is untracked and was last
//!   modified before the retention cutoff (a file younger than that may belong to a write in
//!   flight).
//!
//! Tombstones are what delta-rs's log replay returns (checkpoint and commits), together with
//! every `remove` in the commit files still in `_delta_log/` and in the checkpoint (read by
//! DuckDB's Parquet reader) for their deletion vectors; when the checkpoint's removes cannot be
//! read, no deletion-vector file is deleted at all. A retention below the table's
//! `delta.deletedFileRetentionDuration` is refused unless the caller says otherwise.
//!
//! LITE (`mode := 'lite'`, Delta 3.3+'s `VACUUM … LITE`): no listing — only the expired
//! tombstones the log names (and their deletion vectors) that still exist, are not valid and
//! lie inside the table; untracked files stay. Fast on a large table on object storage, where a
//! listing is what costs (delta#4008).
//!
//! Refused before anything is listed, as Delta's `vacuumProtocolCheck` asks of a vacuum: a
//! protocol with a reader or writer feature this vacuum does not know (a feature may keep files
//! in the table directory that the log does not name). On a table that keeps Iceberg metadata
//! beside its log (UniForm: `delta.universalFormat.enabledFormats` with `iceberg`, or an
//! `icebergCompat*` feature) every directory named `metadata` is left alone, as Spark's VACUUM
//! leaves it — here also when UniForm was switched off but the feature is still listed — and,
//! unlike Spark's, every file the Iceberg metadata there still references is kept
//! ([`crate::action::uniform_view`]): after a commit that did not convert, the Iceberg view
//! lags the log and would otherwise lose the files it reads.
//!
//! On a local disk both sides are compared by real path (symlinks and `..` resolved): the table
//! named through a symlink, or a log naming its files by absolute `file:` paths under another
//! spelling of the directory, keeps every live file. A live or retained file the log names by an
//! absolute path outside the table (a moved table, another mount, a shallow clone) is refused
//! ("prefix mismatch"): a listing could not tell such a table's files from untracked ones.

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::SystemTime;

use futures::TryStreamExt;
use serde_json::Value;

use crate::action::delete_files::{DeletedFile, delete_files};
use crate::action::real_paths::RealPaths;
use crate::duck::{HostDb, Nested, quote_file};
use crate::error::{Error, ErrorKind, Result};
use crate::plan::expiry::{Deletion, FileKind};
use crate::table::delta::{DeltaLakeTable, LogFile, deletion_vector_file, delta_error, read_log_file, resolve};

/// Delta's default `delta.deletedFileRetentionDuration`: 7 days.
pub const DEFAULT_RETENTION_HOURS: f64 = 168.0;

/// What the caller asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct VacuumOptions {
    /// Files removed (or, untracked, modified) more than this many hours ago go; `None`: the
    /// table's `delta.deletedFileRetentionDuration`.
    pub retention_hours: Option<f64>,
    /// Plan only.
    pub dry_run: bool,
    /// Refuse a retention below the table's.
    pub enforce_retention_duration: bool,
    /// LITE (Delta 3.3+): only the expired tombstones the log names, without listing the table
    /// (untracked files stay).
    pub lite: bool,
}

/// Why a file goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VacuumReason {
    /// Removed from the table longer ago than the retention.
    Tombstone,
    /// Never referenced by the log we have (failed writes, copies, …).
    Untracked,
}

impl VacuumReason {
    /// `tombstone` / `untracked`.
    pub fn as_str(self) -> &'static str {
        match self {
            VacuumReason::Tombstone => "tombstone",
            VacuumReason::Untracked => "untracked",
        }
    }
}

/// One file the vacuum deleted (or would).
#[derive(Debug, Clone, PartialEq)]
pub struct VacuumedFile {
    /// Why.
    pub reason: VacuumReason,
    /// Last modification, ms since the epoch.
    pub modified_ms: i64,
    /// The deletion and its outcome.
    pub deleted: DeletedFile,
}

/// What a vacuum did (or, dry, would do).
#[derive(Debug, Clone, PartialEq)]
pub struct VacuumReport {
    /// The retention in force, hours.
    pub retention_hours: f64,
    /// The files, sorted by path.
    pub files: Vec<VacuumedFile>,
    /// Whether nothing was deleted on purpose.
    pub dry_run: bool,
}

impl VacuumReport {
    /// Files deleted (or that would be).
    pub fn removed(&self) -> u64 {
        self.files.iter().filter(|f| f.deleted.removed()).count() as u64
    }

    /// Bytes given back (or that would be).
    pub fn reclaimed_bytes(&self) -> u64 {
        self.files.iter().map(|f| f.deleted.reclaimed_bytes()).sum()
    }
}

/// The table's `delta.deletedFileRetentionDuration`, in hours.
pub fn table_retention_hours(table: &DeltaLakeTable) -> Result<f64> {
    match table.property("delta.deletedFileRetentionDuration") {
        None => Ok(DEFAULT_RETENTION_HOURS),
        Some(text) => interval_hours(text).ok_or_else(|| {
            Error::new(
                ErrorKind::CorruptMetadata,
                format!("delta.deletedFileRetentionDuration '{text}' is not an interval ('interval 7 days')"),
            )
        }),
    }
}

/// `interval 7 days`, `interval 168 hours`, `2 weeks`… in hours (Delta's `CalendarInterval`).
pub fn interval_hours(text: &str) -> Option<f64> {
    let text = text.trim().to_ascii_lowercase();
    let text = text.strip_prefix("interval").unwrap_or(&text).trim();
    let mut parts = text.split_whitespace();
    let mut hours = 0.0;
    let mut any = false;
    while let Some(number) = parts.next() {
        let n: f64 = number.parse().ok()?;
        let unit = parts.next()?.trim_end_matches('s');
        hours += n * match unit {
            "week" => 168.0,
            "day" => 24.0,
            "hour" => 1.0,
            "minute" => 1.0 / 60.0,
            "second" => 1.0 / 3600.0,
            "millisecond" => 1.0 / 3_600_000.0,
            "microsecond" => 1.0 / 3_600_000_000.0,
            _ => return None,
        };
        any = true;
    }
    (any && hours.is_finite() && hours >= 0.0).then_some(hours)
}

/// Reader features whose files this vacuum knows (anything else is refused, as Delta's
/// `vacuumProtocolCheck` asks of a writer).
const VACUUM_SAFE_READER_FEATURES: &[&str] = &[
    "columnMapping",
    "deletionVectors",
    "timestampNtz",
    "vacuumProtocolCheck",
    "typeWidening",
    "typeWidening-preview",
    "variantType",
    "variantType-preview",
    // Shredding changes how a data file lays out its variant columns, not which files exist.
    "variantShredding",
    "variantShredding-preview",
    "v2Checkpoint",
];

/// Writer features whose files this vacuum knows: their files are data files the log names,
/// deletion vectors, or files inside `_delta_log/` (checkpoints, sidecars), or, for Iceberg
/// compatibility, the `metadata` directory it leaves alone
/// ([`DeltaLakeTable::keeps_iceberg_metadata`]).
/// Anything else — `catalogManaged`, whose latest commits the log here may not show, or a
/// feature newer than this list — is refused.
const VACUUM_SAFE_WRITER_FEATURES: &[&str] = &[
    "appendOnly",
    "invariants",
    "checkConstraints",
    "changeDataFeed",
    "generatedColumns",
    "columnMapping",
    "identityColumns",
    "deletionVectors",
    "rowTracking",
    "timestampNtz",
    "domainMetadata",
    "v2Checkpoint",
    "clustering",
    "icebergCompatV1",
    "icebergCompatV2",
    "icebergCompatV3",
    "icebergWriterCompatV1",
    "icebergWriterCompatV3",
    "inCommitTimestamp",
    "vacuumProtocolCheck",
    "typeWidening",
    "typeWidening-preview",
    "variantType",
    "variantType-preview",
    "variantShredding",
    "variantShredding-preview",
    "allowColumnDefaults",
    "checkpointProtection",
    "materializePartitionColumns",
    // Schema metadata (`__COLLATIONS`) and optional per-collation stats: no file of their own.
    "collations",
    "collations-preview",
];

/// Refuses a table whose protocol could reference files this vacuum cannot see
/// ([`protocol_refusal`]).
fn check_protocol(table: &DeltaLakeTable) -> Result<()> {
    match protocol_refusal(table) {
        None => Ok(()),
        Some(what) => Err(Error::new(
            ErrorKind::Unsupported,
            format!("Delta table '{}' {what}; nothing vacuumed", table.root.display()),
        )),
    }
}

/// A reader or writer version or feature of the table's protocol this vacuum does not know, as
/// `uses reader feature 'x', whose files this vacuum does not know`, or `None`: the one decision
/// the vacuum refuses by and the read-only functions report (`cleanup_blocked_by`).
pub fn protocol_refusal(table: &DeltaLakeTable) -> Option<String> {
    table
        .unknown_protocol(VACUUM_SAFE_READER_FEATURES, VACUUM_SAFE_WRITER_FEATURES)
        .map(|what| format!("{what}, whose files this vacuum does not know"))
}

/// Plans (and unless `dry_run`, deletes) per the module's rules.
pub fn vacuum(table: &DeltaLakeTable, options: &VacuumOptions, host: &HostDb) -> Result<VacuumReport> {
    check_protocol(table)?;
    let table_hours = table_retention_hours(table)?;
    let retention_hours = options.retention_hours.unwrap_or(table_hours);
    if !retention_hours.is_finite() || retention_hours < 0.0 {
        return Err(Error::invalid(format!("retention_hours must be a number of hours >= 0, got {retention_hours}")));
    }
    if options.enforce_retention_duration && retention_hours < table_hours {
        return Err(Error::invalid(format!(
            "retention_hours {} is below the table's delta.deletedFileRetentionDuration ({} hours): files that \
             recent may still be read by time travel or by a running query; pass enforce_retention_duration := \
             false if you are sure",
            crate::report::trim_number(retention_hours),
            crate::report::trim_number(table_hours)
        )));
    }
    let cutoff_ms = chrono::Utc::now().timestamp_millis() - (retention_hours * 3_600_000.0) as i64;
    let (root, candidates) = {
        let conn = host.connect()?;
        let access = crate::store::prepare_remote(&conn, &table.table_root()?)?;
        if let Some(notice) = &access.notice {
            crate::progress_lines::line(|| notice.clone());
        }
        candidates(table, cutoff_ms, &conn, options.lite)?
    };
    let candidates = without_iceberg_view_files(table, candidates)?;
    // Deleting only after the listing: a commit since would have been seen by a re-read.
    if !options.dry_run {
        let latest =
            crate::runtime::block_on(table.table.get_latest_version())?.map_err(|e| delta_error(&table.root, e))?;
        if latest as i64 != table.version {
            return Err(Error::new(
                ErrorKind::CommitConflict,
                format!(
                    "commit conflict: Delta table '{}' moved from version {} to {latest} while its files were listed; \
                     nothing was deleted (run again)",
                    table.root.display(),
                    table.version
                ),
            ));
        }
    }
    let deletions = candidates
        .iter()
        .map(|c| Deletion {
            kind: match c.reason {
                VacuumReason::Tombstone => FileKind::DataFile,
                VacuumReason::Untracked => FileKind::OrphanFile,
            },
            path: c.path.to_string_lossy().into_owned(),
            size_bytes: Some(c.size_bytes),
            snapshot_id: None,
            inside_location: c.path.starts_with(&root) && c.path != root,
        })
        .collect();
    // Delta VACUUM checks real paths against the table root itself (its prefix check and listing).
    let deleted = delete_files(deletions, options.dry_run, None);
    Ok(VacuumReport {
        retention_hours,
        files: candidates
            .into_iter()
            .zip(deleted)
            .map(|(c, deleted)| VacuumedFile { reason: c.reason, modified_ms: c.modified_ms, deleted })
            .collect(),
        dry_run: options.dry_run,
    })
}

/// `candidates` without the files a UniForm table's Iceberg view still reads
/// ([`crate::action::uniform_view`]), compared by real path on a local disk.
fn without_iceberg_view_files(table: &DeltaLakeTable, candidates: Vec<Candidate>) -> Result<Vec<Candidate>> {
    let view = crate::action::uniform_view::ViewFiles::new(crate::action::uniform_view::iceberg_view_files(table)?);
    if view.is_empty() {
        return Ok(candidates);
    }
    let before = candidates.len();
    let kept: Vec<Candidate> = candidates.into_iter().filter(|c| !view.holds(&c.path.to_string_lossy())).collect();
    let held = before - kept.len();
    if held > 0 {
        crate::progress_lines::line(|| {
            format!("kept {held} files the table's Iceberg view (UniForm metadata/) still reads")
        });
    }
    Ok(kept)
}

/// A file the vacuum would delete.
#[derive(Debug, Clone)]
struct Candidate {
    path: PathBuf,
    size_bytes: u64,
    modified_ms: i64,
    reason: VacuumReason,
}

/// What the log says of removed files: paths removed, and for each the deletion time (none:
/// keep it) and deletion-vector file.
#[derive(Default)]
struct Removes {
    /// (local path, deletionTimestamp, deletion-vector file) of every remove seen.
    entries: Vec<(PathBuf, Option<i64>, Option<PathBuf>)>,
    /// Whether every remove's deletion vector is known (else no DV file may be deleted).
    deletion_vectors_known: bool,
}

/// What the listing skips, as Spark's VACUUM: names starting with `_` or `.` at any depth —
/// except the directories `_change_data`, `_delta_index` and partition directories (`col=…` of
/// a partition column) — and, on a table that keeps Iceberg metadata
/// ([`DeltaLakeTable::keeps_iceberg_metadata`]),
/// every directory named `metadata`.
struct Hidden {
    partition_prefixes: Vec<String>,
    iceberg_metadata: bool,
}

impl Hidden {
    fn of(table: &DeltaLakeTable) -> Self {
        Hidden {
            partition_prefixes: table.partition_columns().iter().map(|c| format!("{c}=")).collect(),
            iceberg_metadata: table.keeps_iceberg_metadata(),
        }
    }

    fn dir(&self, name: &str) -> bool {
        (self.iceberg_metadata && name == "metadata")
            || ((name.starts_with('_') || name.starts_with('.'))
                && !(name.starts_with("_change_data")
                    || name.starts_with("_delta_index")
                    || self.partition_prefixes.iter().any(|p| name.starts_with(p.as_str()))))
    }

    fn file(&self, name: &str) -> bool {
        name.starts_with('_') || name.starts_with('.')
    }
}

/// The error for a live or retained file named outside the table.
fn prefix_mismatch(table: &DeltaLakeTable, root: &str, path: &str) -> Error {
    Error::new(
        ErrorKind::Unsupported,
        format!(
            "prefix mismatch: Delta table '{}' names '{path}', which is not under the table's location '{root}' \
             (a moved or symlinked location, another mount, a shallow clone): untracked files cannot be told apart \
             from that table's, so nothing was vacuumed",
            table.root.display()
        ),
    )
}

/// The files to delete, and the table root they were listed under (on a local disk its real
/// path).
fn candidates(table: &DeltaLakeTable, cutoff_ms: i64, conn: &Nested, lite: bool) -> Result<(PathBuf, Vec<Candidate>)> {
    let removes = removes(table, conn)?;
    let mut valid: HashSet<PathBuf> = HashSet::new();
    for f in &table.files {
        valid.insert(f.local_path.clone());
        valid.extend(f.deletion_vector_path.clone());
    }
    let mut expired: HashSet<PathBuf> = HashSet::new();
    // LITE: the expired removes' deletion-vector files go with them (when every vector is known).
    let mut expired_vectors: HashSet<PathBuf> = HashSet::new();
    for (path, deleted_ms, dv) in &removes.entries {
        if deleted_ms.is_none_or(|t| t > cutoff_ms) {
            valid.insert(path.clone());
            valid.extend(dv.clone());
        } else {
            expired.insert(path.clone());
            expired_vectors.extend(dv.clone().filter(|_| removes.deletion_vectors_known));
        }
    }
    if lite {
        return lite_candidates(table, &valid, &expired, &expired_vectors);
    }
    let hidden = Hidden::of(table);
    if crate::store::local_path(&table.root.to_string_lossy()).is_none() {
        let out = remote_candidates(table, &removes, &valid, &expired, &hidden, cutoff_ms)?;
        return Ok((table.root.clone(), out));
    }
    // Real paths on both sides: the root, every file the log names (relative ones under the real
    // root), and the listing, which starts at the real root.
    let (root, mut to_real) = real_paths_under(table)?;
    let valid: HashSet<PathBuf> = valid.iter().map(&mut to_real).collect();
    let expired: HashSet<PathBuf> = expired.iter().map(&mut to_real).collect();
    if let Some(outside) = valid.iter().find(|p| !p.starts_with(&root)) {
        return Err(prefix_mismatch(table, &root.to_string_lossy(), &outside.to_string_lossy()));
    }
    let cutoff = SystemTime::UNIX_EPOCH + std::time::Duration::from_millis(cutoff_ms.max(0) as u64);
    let mut out = Vec::new();
    let mut stack = vec![root.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let entry = entry?;
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            let meta = entry.metadata()?; // does not follow symlinks
            if dir == root && name == "_delta_log" {
                continue;
            }
            if meta.is_dir() {
                if !hidden.dir(&name) {
                    stack.push(path);
                }
                continue;
            }
            if hidden.file(&name) || !meta.is_file() || valid.contains(&path) {
                continue;
            }
            if !removes.deletion_vectors_known && is_deletion_vector_name(&name) {
                continue;
            }
            // A tombstone's age is its deletion timestamp (the protocol's, and delta-rs's, rule;
            // a copy of the table gives its files fresh modification times). An untracked file's
            // age is its modification time: one written a moment ago may belong to a commit in
            // flight. (Spark also wants an old modification time for tombstones.)
            let modified = meta.modified().unwrap_or(SystemTime::now());
            let tombstone = expired.contains(&path);
            if !tombstone && modified >= cutoff {
                continue;
            }
            let modified_ms = modified.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
            let reason = if tombstone { VacuumReason::Tombstone } else { VacuumReason::Untracked };
            out.push(Candidate { path, size_bytes: meta.len(), modified_ms, reason });
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok((root, out))
}

/// [`candidates`] on object storage: one recursive listing of the table's prefix (sizes and
/// last-modified times from it), the same rules as on disk: `_delta_log/` and hidden names
/// ([`Hidden`]) are never touched, and a live or retained file outside the prefix is refused.
fn remote_candidates(
    table: &DeltaLakeTable,
    removes: &Removes,
    valid: &HashSet<PathBuf>,
    expired: &HashSet<PathBuf>,
    hidden: &Hidden,
    cutoff_ms: i64,
) -> Result<Vec<Candidate>> {
    let root = table.root.to_string_lossy().trim_end_matches('/').to_string();
    // Matched raw and percent-decoded (crate::store::decoded): only ever more files are kept.
    let valid_decoded: HashSet<String> = valid.iter().map(|p| crate::store::decoded(&p.to_string_lossy())).collect();
    if let Some(outside) = valid
        .iter()
        .map(|p| crate::store::canonical(&p.to_string_lossy()))
        .find(|p| !p.starts_with(&format!("{root}/")))
    {
        return Err(prefix_mismatch(table, &root, &outside));
    }
    let expired_decoded: HashSet<String> =
        expired.iter().map(|p| crate::store::decoded(&p.to_string_lossy())).collect();
    let mut out = Vec::new();
    for object in crate::runtime::block_on(crate::store::list(&root))?? {
        let Some(relative) = object.location.strip_prefix(&format!("{root}/")) else { continue };
        let parts: Vec<&str> = relative.split('/').collect();
        let (dirs, name) = parts.split_at(parts.len() - 1);
        let name = name[0];
        if dirs.first() == Some(&"_delta_log") || dirs.iter().any(|d| hidden.dir(d)) || hidden.file(name) {
            continue;
        }
        let path = PathBuf::from(&object.location);
        let decoded = crate::store::decoded(&object.location);
        if valid.contains(&path)
            || valid_decoded.contains(&decoded)
            || (!removes.deletion_vectors_known && is_deletion_vector_name(name))
        {
            continue;
        }
        let tombstone = expired.contains(&path) || expired_decoded.contains(&decoded);
        if !tombstone && object.modified_ms >= cutoff_ms {
            continue;
        }
        let reason = if tombstone { VacuumReason::Tombstone } else { VacuumReason::Untracked };
        out.push(Candidate { path, size_bytes: object.size_bytes, modified_ms: object.modified_ms, reason });
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// LITE's files ([`VacuumOptions::lite`]): the expired tombstones and their deletion vectors
/// that still exist, are not valid, and lie inside the table (by real path on a local disk; a
/// path outside is never touched) — no listing, so no untracked file.
fn lite_candidates(
    table: &DeltaLakeTable,
    valid: &HashSet<PathBuf>,
    expired: &HashSet<PathBuf>,
    expired_vectors: &HashSet<PathBuf>,
) -> Result<(PathBuf, Vec<Candidate>)> {
    let mut out = Vec::new();
    let named = expired.iter().chain(expired_vectors.iter());
    if crate::store::local_path(&table.root.to_string_lossy()).is_none() {
        let root = table.root.to_string_lossy().trim_end_matches('/').to_string();
        let valid: HashSet<String> = valid.iter().map(|p| crate::store::decoded(&p.to_string_lossy())).collect();
        for path in named {
            let location = crate::store::canonical(&path.to_string_lossy());
            if !location.starts_with(&format!("{root}/")) || valid.contains(&crate::store::decoded(&location)) {
                continue;
            }
            if let Some(object) = crate::runtime::block_on(crate::store::head(&location))?? {
                let (size_bytes, modified_ms) = (object.size_bytes, object.modified_ms);
                out.push(Candidate {
                    path: PathBuf::from(location),
                    size_bytes,
                    modified_ms,
                    reason: VacuumReason::Tombstone,
                });
            }
        }
        out.sort_by(|a, b| a.path.cmp(&b.path));
        return Ok((table.root.clone(), out));
    }
    let (root, mut to_real) = real_paths_under(table)?;
    let valid: HashSet<PathBuf> = valid.iter().map(&mut to_real).collect();
    for path in named {
        let path = to_real(path);
        if !path.starts_with(&root) || path == root || valid.contains(&path) {
            continue;
        }
        let Ok(meta) = std::fs::symlink_metadata(&path) else { continue };
        if !meta.is_file() {
            continue;
        }
        let modified_ms = meta
            .modified()
            .ok()
            .and_then(|m| m.duration_since(SystemTime::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_millis() as i64);
        out.push(Candidate { path, size_bytes: meta.len(), modified_ms, reason: VacuumReason::Tombstone });
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out.dedup_by(|a, b| a.path == b.path);
    Ok((root, out))
}

/// The table root's real path, and a function giving the real path of a path the log names
/// (one under the root as named is taken under the real root).
fn real_paths_under(table: &DeltaLakeTable) -> Result<(PathBuf, impl FnMut(&PathBuf) -> PathBuf + '_)> {
    let root = std::fs::canonicalize(&table.root)?;
    let real_root = root.clone();
    let mut real = RealPaths::default();
    let to_real = move |p: &PathBuf| match p.strip_prefix(&table.root) {
        Ok(relative) => real.or_same(&real_root.join(relative)),
        Err(_) => real.or_same(p),
    };
    Ok((root, to_real))
}

fn is_deletion_vector_name(name: &str) -> bool {
    name.starts_with("deletion_vector_") && name.ends_with(".bin")
}

/// Every remove the log still has: delta-rs's tombstones (log replay of the checkpoint and the
/// commits after it), every `remove` of the commit files in `_delta_log/` up to the version read,
/// and the checkpoint's removes read by DuckDB (for their deletion vectors).
fn removes(table: &DeltaLakeTable, conn: &Nested) -> Result<Removes> {
    let mut out = Removes { deletion_vectors_known: true, ..Default::default() };
    let root = &table.root;
    let state = table.table.snapshot().map_err(|e| delta_error(root, e))?;
    let log_store = table.table.log_store();
    let tombstones: Vec<(String, Option<i64>)> = crate::runtime::block_on(async {
        state
            .all_tombstones(log_store.as_ref())
            .map_ok(|t| (t.path().to_string(), t.deletion_timestamp()))
            .try_collect()
            .await
    })?
    .map_err(|e| delta_error(root, e))?;
    let mut known_dv: HashSet<PathBuf> = HashSet::new();
    let add = |out: &mut Removes, remove: &Value, known_dv: &mut HashSet<PathBuf>| {
        let Some(path) = remove.get("path").and_then(Value::as_str) else { return };
        let path = resolve(root, &percent_encoding::percent_decode_str(path).decode_utf8_lossy());
        let deleted = remove.get("deletionTimestamp").and_then(Value::as_i64);
        let dv = remove
            .get("deletionVector")
            .filter(|v| !v.is_null())
            .and_then(|v| serde_json::from_value::<deltalake_core::kernel::DeletionVectorDescriptor>(v.clone()).ok())
            .and_then(|d| deletion_vector_file(root, &d));
        known_dv.insert(path.clone());
        out.entries.push((path, deleted, dv));
    };
    // Commit files up to the version read.
    let log: Vec<(String, PathBuf)> = table.log_entries()?.into_iter().map(|e| (e.name, e.path)).collect();
    for (name, path) in &log {
        let Some(LogFile::Commit(version)) = LogFile::of(name) else { continue };
        if version > table.version {
            continue;
        }
        for line in read_log_file(path)?.lines() {
            if let Ok(action) = serde_json::from_str::<Value>(line)
                && let Some(remove) = action.get("remove")
            {
                add(&mut out, remove, &mut known_dv);
            }
        }
    }
    // The checkpoint's removes (classic checkpoints: one or several Parquet parts).
    let checkpoints = checkpoint_parts(&log, table.version);
    if !checkpoints.is_empty() {
        let list = checkpoints.iter().map(|p| quote_file(&p.to_string_lossy())).collect::<Vec<_>>().join(", ");
        match conn.query(&format!(
            "SELECT to_json(remove)::VARCHAR FROM read_parquet([{list}], union_by_name = true) WHERE remove IS NOT NULL"
        )) {
            Ok(rows) => {
                for row in &rows.rows {
                    if let Some(remove) = row[0].text().and_then(|t| serde_json::from_str::<Value>(t).ok()) {
                        add(&mut out, &remove, &mut known_dv);
                    }
                }
            }
            Err(_) => out.deletion_vectors_known = false,
        }
    }
    // Tombstones only delta-rs saw (their deletion vectors unknown to us).
    for (path, deleted) in tombstones {
        let path = resolve(root, &path);
        if !known_dv.contains(&path) {
            out.deletion_vectors_known = false;
            out.entries.push((path, deleted, None));
        }
    }
    Ok(out)
}

/// (tombstones, expired tombstones): the remove actions the current state keeps (delta-rs's log
/// replay), and those removed longer ago than `retention_hours`.
pub fn tombstone_counts(table: &DeltaLakeTable, retention_hours: f64) -> Result<(u64, u64)> {
    let cutoff_ms = chrono::Utc::now().timestamp_millis() - (retention_hours * 3_600_000.0) as i64;
    let state = table.table.snapshot().map_err(|e| delta_error(&table.root, e))?;
    let log_store = table.table.log_store();
    let times: Vec<Option<i64>> = crate::runtime::block_on(async {
        state.all_tombstones(log_store.as_ref()).map_ok(|t| t.deletion_timestamp()).try_collect().await
    })?
    .map_err(|e| delta_error(&table.root, e))?;
    let expired = times.iter().filter(|t| t.is_some_and(|t| t <= cutoff_ms)).count();
    Ok((times.len() as u64, expired as u64))
}

/// The Parquet files of the newest classic checkpoint at or below `version`, among `log`.
fn checkpoint_parts(log: &[(String, PathBuf)], version: i64) -> Vec<PathBuf> {
    let mut best: Option<i64> = None;
    let mut parts: Vec<(i64, PathBuf)> = Vec::new();
    for (name, path) in log {
        let Some(LogFile::Checkpoint { version: v, parquet: true }) = LogFile::of(name) else { continue };
        if v <= version {
            best = best.max(Some(v));
            parts.push((v, path.clone()));
        }
    }
    parts.into_iter().filter(|(v, _)| Some(*v) == best).map(|(_, p)| p).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retention_intervals_parse_as_delta_writes_them() {
        let cases = [
            ("interval 7 days", Some(168.0)),
            ("interval 168 hours", Some(168.0)),
            ("INTERVAL 1 WEEK", Some(168.0)),
            ("interval 1 day 12 hours", Some(36.0)),
            ("interval 30 minutes", Some(0.5)),
            ("7 days", Some(168.0)),
            ("interval seven days", None),
            ("interval 7 fortnights", None),
            ("", None),
        ];
        for (text, want) in cases {
            assert_eq!(interval_hours(text), want, "{text}");
        }
    }
}
