//! The Lakehouse Health Scorecard: what one gate run did, as data. The gate fills it
//! ([`crate::action::gate`]), the SQL function prints it as rows and the Slack card renders it
//! ([`crate::notify::card`]); both sit above this module. Statuses and verdicts are enums,
//! printed only at those edges.

use std::time::Duration;

pub use crate::table::TableFormat;

/// How a gate run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunStatus {
    /// Something was compacted or expired.
    Maintained,
    /// Nothing needed doing; the table is untouched.
    Optimal,
    /// Planned only.
    DryRun,
    /// Some degraded partitions were not compacted: another writer's commits kept conflicting
    /// with theirs (the rest of the maintenance stands).
    Incomplete,
}

impl RunStatus {
    /// `maintained`, `optimal`, `dry run`, `incomplete`.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Maintained => "maintained",
            RunStatus::Optimal => "optimal",
            RunStatus::DryRun => "dry run",
            RunStatus::Incomplete => "incomplete",
        }
    }
}

/// What a measured scan saw ([`crate::action::scan`]): a gate scans the compacted partitions
/// before and after.
#[derive(Debug, Clone, PartialEq)]
pub struct ScanResult {
    /// Files scanned.
    pub files: u64,
    /// Rows read.
    pub rows: u64,
    /// Sum over rows of `hash(every column)`, as text (a HUGEINT).
    pub checksum: String,
    /// The best of the timed runs.
    pub elapsed: Duration,
}

/// What happened to one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineVerdict {
    /// Its small files were rewritten.
    Compacted,
    /// A dry run would rewrite them.
    WouldCompact,
    /// Below the threshold.
    Healthy,
    /// Degraded or not, left alone for a stated reason.
    Skipped,
}

impl LineVerdict {
    /// `compacted`, `would compact`, `healthy`, `skipped`.
    pub fn as_str(self) -> &'static str {
        match self {
            LineVerdict::Compacted => "compacted",
            LineVerdict::WouldCompact => "would compact",
            LineVerdict::Healthy => "healthy",
            LineVerdict::Skipped => "skipped",
        }
    }

    /// Compacted, or would be.
    pub fn acts(self) -> bool {
        matches!(self, LineVerdict::Compacted | LineVerdict::WouldCompact)
    }
}

/// One partition's line of the scorecard.
#[derive(Debug, Clone, PartialEq)]
pub struct PartitionLine {
    /// Label.
    pub partition: String,
    /// Spec id.
    pub spec_id: i32,
    /// What happened to the partition.
    pub verdict: LineVerdict,
    /// Why.
    pub reason: String,
    /// Live data files before and after.
    pub files_before: u64,
    /// See `files_before`.
    pub files_after: u64,
    /// Small files before and after.
    pub small_files_before: u64,
    /// See `small_files_before`.
    pub small_files_after: u64,
    /// Fragmentation ratio before and after.
    pub ratio_before: f64,
    /// See `ratio_before`.
    pub ratio_after: f64,
    /// Bytes rewritten (or that would be).
    pub bytes_consolidated: u64,
    /// Rows the rewritten files' deletion vectors deleted, purged from storage (or that would be).
    pub rows_purged: u64,
    /// What was done, in words.
    pub action: String,
    /// Who rewrote it (`local`, `spark`; `None`: not compacted).
    pub executor: Option<String>,
    /// Why that executor, and what Spark did.
    pub executor_reason: Option<String>,
    /// The layout a compacted partition was written in (`binpack`, `sort(…)`, `zorder(…)`).
    pub strategy: Option<String>,
    /// The file-size distribution before and after ([`crate::profile::histogram`]; after: as
    /// profiled after the run, or for a dry run the same as before).
    pub sizes_before: String,
    /// See `sizes_before`.
    pub sizes_after: String,
    /// What the partition's commit did (`committed`, `retried 2×, committed`, `conflict: gave up
    /// …`; [`crate::action::compact::PartitionOutcome`]); `None`: nothing was to commit.
    pub commit: Option<String>,
}

impl PartitionLine {
    /// Whether its compaction was given up on conflicts ([`PartitionLine::commit`]).
    pub fn gave_up(&self) -> bool {
        self.commit.as_deref().is_some_and(|c| c.starts_with("conflict"))
    }
}

/// The whole scorecard of one run.
#[derive(Debug, Clone, PartialEq)]
pub struct Scorecard {
    /// This run's id.
    pub execution_id: String,
    /// The table as named.
    pub table: String,
    /// Its format.
    pub format: TableFormat,
    /// How the run ended.
    pub status: RunStatus,
    /// Whether nothing was changed on purpose.
    pub dry_run: bool,
    /// When the run started (ms since the epoch) and how long it took.
    pub started_ms: i64,
    /// See `started_ms`.
    pub duration_ms: u64,
    /// Thresholds used.
    pub small_file_threshold_mb: f64,
    /// See `small_file_threshold_mb`.
    pub fragmentation_ratio_threshold: f64,
    /// The retention in force.
    pub retention_days: f64,
    /// One line per partition.
    pub partitions: Vec<PartitionLine>,
    /// What went wrong after a commit point without undoing the commit (a version hint not
    /// moved, a post-commit checkpoint that failed): the maintenance stands, but someone should
    /// look. Also options given that do not apply to the table's format, ignored.
    pub warnings: Vec<String>,
    /// Degraded partitions at the start.
    pub partitions_degraded: u64,
    /// Partitions compacted (or that would be).
    pub partitions_compacted: u64,
    /// Small files before minus after, in compacted partitions only.
    pub small_files_eliminated: u64,
    /// Bytes rewritten.
    pub bytes_consolidated: u64,
    /// Average fragmentation ratio before and after.
    pub avg_ratio_before: f64,
    /// See `avg_ratio_before`.
    pub avg_ratio_after: f64,
    /// The projected scan speedup of the compacted partitions on the local-disk model calibrated
    /// on DuckDB's scans ([`crate::plan::projection`]; 1 when nothing is compacted).
    pub projected_speedup_low: f64,
    /// Their files before / after: the speedup when opening a file is all a scan costs.
    pub projected_speedup_high: f64,
    /// Share of the rewritten bytes the measured scans covered (a bounded sample of the rewrite
    /// groups; 0: not measured).
    pub scan_share: f64,
    /// Scan of the sampled rewrite groups before (inputs, deletes applied) and after (outputs),
    /// when measured.
    pub scan_before: Option<ScanResult>,
    /// See `scan_before`.
    pub scan_after: Option<ScanResult>,
    /// The compaction's snapshot.
    pub compaction_snapshot_id: Option<i64>,
    /// Small manifests merged by the manifest rewrite (or that would be), and the manifests
    /// they became.
    pub manifests_merged: u64,
    /// See `manifests_merged`.
    pub manifests_written: u64,
    /// The manifest rewrite's snapshot.
    pub manifest_snapshot_id: Option<i64>,
    /// Position delete files the position delete rewrite replaced (or would), and the delete
    /// files (or deletion vectors) it wrote (known once written).
    pub delete_files_rewritten: u64,
    /// See `delete_files_rewritten`.
    pub delete_files_written: u64,
    /// The position delete rewrite's snapshot.
    pub delete_rewrite_snapshot_id: Option<i64>,
    /// Snapshots expired (or that would be).
    pub snapshots_expired: u64,
    /// Files deleted by the expiry (or that would be).
    pub files_deleted: u64,
    /// Bytes reclaimed by the expiry (or that would be).
    pub bytes_reclaimed: u64,
    /// What happened to the card: `sent`, `not sent: …`, `failed after N attempts: …`.
    pub notification: String,
}

impl Scorecard {
    /// Scan time before / after over the compacted partitions, when measured.
    pub fn measured_speedup(&self) -> Option<f64> {
        let (before, after) = (self.scan_before.as_ref()?, self.scan_after.as_ref()?);
        let after_s = after.elapsed.as_secs_f64();
        (after_s > 0.0).then(|| before.elapsed.as_secs_f64() / after_s)
    }
}

/// `7` for 7.0, `0.5` for 0.5.
pub fn trim_number(x: f64) -> String {
    let text = format!("{x:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_trimmed() {
        assert_eq!(trim_number(7.0), "7");
        assert_eq!(trim_number(0.5), "0.5");
        assert_eq!(trim_number(1.25), "1.25");
    }
}
