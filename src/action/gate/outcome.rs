//! What a gate run's steps leave ([`Compacted`], [`Later`], [`Retired`]), the sample of rewrite
//! groups its scans measure ([`ScanSample`]), and what the scorecard makes of them
//! ([`partition_lines`], [`Outcome::scorecard`]). The steps themselves are the parent's.

use crate::action::compact::{CompactionReport, GroupFiles};
use crate::action::executor::{Executed, SparkOutcome};
use crate::action::expire_snapshots::{ExpiryOptions, retention_days_in_force};
use crate::action::rewrite_manifests::RewriteManifestsReport;
use crate::action::rewrite_position_deletes::RewritePositionDeletesReport;
use crate::action::scan::ScanResult;
use crate::action::spark_rewrite::Route;
use crate::plan::compaction::{PartitionPlan, Verdict};
use crate::plan::format_options::FormatOnly;
use crate::plan::projection::SpeedupRange;
use crate::profile::{PartitionProfile, Summary, Thresholds, summarize};
use crate::report::{LineVerdict, PartitionLine, RunStatus, Scorecard};
use crate::table::{Table, TableFormat};

/// What retiring history did: Iceberg's snapshot expiry, Delta's VACUUM.
pub(super) struct Retired {
    /// The retention in force, days.
    pub(super) retention_days: f64,
    /// Snapshots expired (Iceberg; Delta's VACUUM expires no versions).
    pub(super) snapshots_expired: u64,
    /// Files deleted (or, dry, that would be) and their bytes.
    pub(super) files_deleted: u64,
    /// See `files_deleted`.
    pub(super) bytes_reclaimed: u64,
    /// Whether the table changed (a commit, or files deleted).
    pub(super) changed: bool,
    /// See [`crate::report::Scorecard::warnings`].
    pub(super) warning: Option<String>,
}

impl Retired {
    /// Nothing retired (the step was left for the next run): the retention in force, no change.
    pub(super) fn nothing(table: &Table, expiry: &ExpiryOptions) -> Retired {
        let retention_days = match table {
            Table::Iceberg { table, .. } => retention_days_in_force(&table.metadata, expiry),
            Table::Delta(table) => expiry.retention_days.unwrap_or_else(|| {
                crate::action::vacuum::table_retention_hours(table).map_or(7.0, |hours| hours / 24.0)
            }),
        };
        Retired {
            retention_days,
            snapshots_expired: 0,
            files_deleted: 0,
            bytes_reclaimed: 0,
            changed: false,
            warning: None,
        }
    }
}

/// Scans per measured speedup: one to warm the cache, one timed (the best counts).
pub(super) const SCAN_RUNS: u32 = 2;

/// The measured scans cover rewrite groups making up at most this share of the bytes the
/// compaction rewrites, and at most [`SCAN_SAMPLE_BYTES`] (but always at least one group), so
/// that they cost the gate a bounded amount whatever the table's size.
pub const SCAN_SAMPLE_SHARE: f64 = 0.1;
/// See [`SCAN_SAMPLE_SHARE`].
pub const SCAN_SAMPLE_BYTES: u64 = 256 * 1024 * 1024;

/// The planned rewrite groups the measured scans cover (indexes into `groups`): in plan order,
/// each that still fits the budget ([`SCAN_SAMPLE_SHARE`] of all their bytes, at most `cap`),
/// else the smallest one. A group is the unit that reads the same rows before (its inputs, with
/// the deletes that apply to them) and after (its one output). Groups outside the sample are
/// verified by the compaction's own checks (rows and non-null counts per output file).
fn scan_sample(groups: &[GroupFiles], cap: u64) -> Vec<usize> {
    let total: u64 = groups.iter().map(|g| g.input_bytes).sum();
    let budget = ((total as f64 * SCAN_SAMPLE_SHARE) as u64).min(cap);
    let mut used = 0u64;
    let mut sample = Vec::new();
    for (i, g) in groups.iter().enumerate() {
        if used + g.input_bytes <= budget {
            used += g.input_bytes;
            sample.push(i);
        }
    }
    if sample.is_empty()
        && let Some((i, _)) = groups.iter().enumerate().min_by_key(|(_, g)| g.input_bytes)
    {
        sample.push(i);
    }
    sample
}

/// The rewrite groups the measured scans cover: a bounded sample ([`scan_sample`]) of those this
/// session rewrites (groups are in plan order; Spark's partitions are not sampled).
pub(super) struct ScanSample {
    /// The sampled groups.
    pub(super) groups: Vec<GroupFiles>,
    /// Whether the scans run (asked, no dry run, something sampled).
    pub(super) measure: bool,
    /// The bytes the sampled groups read.
    pub(super) sampled_bytes: u64,
    /// The bytes every group rewritten here reads.
    pub(super) planned_bytes: u64,
}

impl ScanSample {
    /// The sample of `planned`'s groups; `measure`: whether the scans are to run (asked, and no
    /// dry run).
    pub(super) fn of(planned: &Executed, measure: bool) -> ScanSample {
        let local_groups: Vec<GroupFiles> = planned
            .report
            .groups
            .iter()
            .filter(|g| planned.routes.get(&g.key).is_none_or(|r| !r.spark))
            .cloned()
            .collect();
        let groups: Vec<GroupFiles> =
            scan_sample(&local_groups, SCAN_SAMPLE_BYTES).into_iter().map(|g| local_groups[g].clone()).collect();
        ScanSample {
            measure: measure && !groups.is_empty(),
            sampled_bytes: groups.iter().map(|g| g.input_bytes).sum(),
            planned_bytes: local_groups.iter().map(|g| g.input_bytes).sum(),
            groups,
        }
    }

    /// The share of the bytes rewritten here the scans covered (0 when they did not run).
    fn share(&self, measured: bool) -> f64 {
        if measured { self.sampled_bytes as f64 / self.planned_bytes.max(1) as f64 } else { 0.0 }
    }
}

/// What the compaction step leaves: the run (or, dry or with nothing to compact, the plan), the
/// table as it is after it (reloaded after a commit), its profile then, and the verified scans.
pub(super) struct Compacted {
    pub(super) executed: Executed,
    pub(super) table: Table,
    pub(super) after: Vec<PartitionProfile>,
    pub(super) scan_before: Option<ScanResult>,
    pub(super) scan_after: Option<ScanResult>,
}

/// What the steps after the compaction did: the position delete rewrite and the manifest merge
/// (Iceberg; `None` for Delta, or when left for the next run), the history retired, and the
/// steps left for the next run.
pub(super) struct Later {
    pub(super) deletes: Option<RewritePositionDeletesReport>,
    pub(super) manifests: Option<RewriteManifestsReport>,
    pub(super) retired: Retired,
    pub(super) lost_steps: Vec<String>,
}

/// The scorecard's line of each planned partition: the profile before and after (a dry run
/// reports what the plan would leave, outputs assumed not small), the verdict, the action.
pub(super) fn partition_lines(
    dry_run: bool,
    executed: &Executed,
    before: &[PartitionProfile],
    after: &[PartitionProfile],
) -> Vec<PartitionLine> {
    let report = &executed.report;
    let mut lines = Vec::new();
    for p in &report.plans {
        let b = before.iter().find(|x| x.key == p.key);
        let a = after.iter().find(|x| x.key == p.key);
        let compacted = p.verdict == Verdict::Compact;
        let (files_after, small_after, ratio_after) = match (dry_run, compacted, a) {
            (true, true, _) => {
                let small = p.small_files_before.saturating_sub(p.small_inputs);
                (p.files_after(), small, small as f64 / p.files_after().max(1) as f64)
            }
            (_, _, Some(a)) => (a.total_files, a.small_files, a.fragmentation_ratio),
            (_, _, None) => (0, 0, 0.0),
        };
        let verdict = match (p.verdict, dry_run) {
            (Verdict::Compact, true) => LineVerdict::WouldCompact,
            (Verdict::Compact, false) => LineVerdict::Compacted,
            (Verdict::Healthy, _) => LineVerdict::Healthy,
            (Verdict::Skipped, _) => LineVerdict::Skipped,
        };
        let route = executed.routes.get(&p.key).filter(|_| compacted);
        let spark = executed.spark.get(&p.key);
        lines.push(PartitionLine {
            partition: p.partition.clone(),
            spec_id: p.spec_id,
            verdict,
            reason: p.reason.clone(),
            files_before: p.files_before,
            files_after,
            small_files_before: p.small_files_before,
            small_files_after: small_after,
            ratio_before: b.map_or(0.0, |b| b.fragmentation_ratio),
            ratio_after,
            bytes_consolidated: spark.map_or(p.bytes_to_rewrite, |o| o.bytes_rewritten),
            rows_purged: p.rows_purged,
            action: line_action(dry_run, p, route, spark),
            executor: route.map(|r| if r.spark { "spark" } else { "local" }.to_string()),
            executor_reason: route.map(|r| r.why.clone()),
            strategy: compacted.then(|| report.layout.label()),
            commit: report.outcomes.get(&p.key).map(|o| o.describe()),
            sizes_before: b.map_or_else(String::new, |b| b.size_histogram()),
            sizes_after: a.map_or_else(String::new, |a| a.size_histogram()),
        });
    }
    lines
}

/// What a partition's line says was done to it.
fn line_action(dry_run: bool, p: &PartitionPlan, route: Option<&Route>, spark: Option<&SparkOutcome>) -> String {
    match (p.verdict == Verdict::Compact, spark) {
        (true, Some(o)) => match o.snapshot_id {
            Some(id) => format!(
                "Spark rewrote {} small files into {} file{} (snapshot {id})",
                o.files_rewritten,
                o.files_added,
                if o.files_added == 1 { "" } else { "s" }
            ),
            None => "Spark found nothing to rewrite".into(),
        },
        (true, None) => format!(
            "{} {} small files into {} file{}{}",
            if dry_run { "would rewrite" } else { "rewrote" },
            p.input_files(),
            p.groups.len(),
            if p.groups.len() == 1 { "" } else { "s" },
            if route.is_some_and(|r| r.spark) { " on Spark" } else { "" }
        ),
        (false, _) => "none".into(),
    }
}

/// Everything a run found and did, which the scorecard reports.
pub(super) struct Outcome {
    pub(super) started_ms: i64,
    pub(super) duration_ms: u64,
    pub(super) thresholds: Thresholds,
    pub(super) format: TableFormat,
    pub(super) lines: Vec<PartitionLine>,
    pub(super) summary_before: Summary,
    pub(super) projected: SpeedupRange,
    pub(super) sample: ScanSample,
    pub(super) compacted: Compacted,
    pub(super) compaction_snapshot_id: Option<i64>,
    pub(super) later: Later,
}

impl Outcome {
    /// The measured scorecard (its notification still to be sent: [`deliver`]).
    /// The scorecard of the run `execution_id` of `table`; `format_only`: the options given that
    /// apply to one format only.
    pub(super) fn scorecard(
        self,
        execution_id: &str,
        table: &str,
        dry_run: bool,
        format_only: &FormatOnly,
    ) -> Scorecard {
        let report = &self.compacted.executed.report;
        let lines = &self.lines;
        let compacted_lines: Vec<&PartitionLine> = lines.iter().filter(|l| l.bytes_consolidated > 0).collect();
        let (deletes, manifests) = (&self.later.deletes, &self.later.manifests);
        let manifest_snapshot_id = manifests.as_ref().and_then(|m| m.snapshot_id);
        let delete_rewrite_snapshot_id = deletes.as_ref().and_then(|d| d.snapshot_id);
        let delete_partitions = deletes.iter().flat_map(|d| &d.partitions).filter(|p| p.rewrites);
        let merged_groups = manifests.iter().flat_map(|m| &m.groups).filter(|g| g.merges());
        let summary_after = summarize(&self.compacted.after);
        let retired = &self.later.retired;
        Scorecard {
            execution_id: execution_id.to_string(),
            table: table.to_string(),
            format: self.format,
            status: self.status(dry_run),
            dry_run,
            started_ms: self.started_ms,
            duration_ms: self.duration_ms,
            small_file_threshold_mb: self.thresholds.small_file_threshold_mb,
            fragmentation_ratio_threshold: self.thresholds.fragmentation_ratio_threshold,
            retention_days: retired.retention_days,
            partitions_degraded: self.summary_before.fragmented_partition_count,
            partitions_compacted: compacted_lines.len() as u64,
            small_files_eliminated: compacted_lines
                .iter()
                .map(|l| l.small_files_before.saturating_sub(l.small_files_after))
                .sum(),
            bytes_consolidated: compacted_lines.iter().map(|l| l.bytes_consolidated).sum(),
            avg_ratio_before: self.summary_before.avg_fragmentation_ratio,
            // A dry run projects from its lines (what the plan would leave), like each line does.
            avg_ratio_after: if dry_run {
                lines.iter().map(|l| l.ratio_after).sum::<f64>() / lines.len().max(1) as f64
            } else {
                summary_after.avg_fragmentation_ratio
            },
            projected_speedup_low: self.projected.low,
            projected_speedup_high: self.projected.high,
            scan_share: self.sample.share(self.compacted.scan_after.is_some()),
            scan_before: self.compacted.scan_before.clone(),
            scan_after: self.compacted.scan_after.clone(),
            compaction_snapshot_id: self.compaction_snapshot_id,
            manifests_merged: merged_groups.clone().map(|g| g.small_manifests).sum(),
            manifests_written: merged_groups.map(|g| g.outputs()).sum(),
            manifest_snapshot_id,
            delete_files_rewritten: delete_partitions.clone().map(|p| p.delete_files_before).sum(),
            delete_files_written: delete_partitions.filter_map(|p| p.delete_files_after).sum(),
            delete_rewrite_snapshot_id,
            snapshots_expired: retired.snapshots_expired,
            files_deleted: retired.files_deleted,
            bytes_reclaimed: retired.bytes_reclaimed,
            notification: String::new(),
            warnings: self.warnings(format_only, report),
            partitions: self.lines,
        }
    }

    /// The partitions given up: another writer's commits kept conflicting.
    fn gave_up(report: &CompactionReport) -> Vec<&str> {
        report
            .plans
            .iter()
            .filter(|p| report.outcomes.get(&p.key).is_some_and(|o| o.gave_up()))
            .map(|p| p.partition.as_str())
            .collect()
    }

    fn status(&self, dry_run: bool) -> RunStatus {
        let executed = &self.compacted.executed;
        let changed = executed.committed()
            || self.later.manifests.as_ref().and_then(|m| m.snapshot_id).is_some()
            || self.later.deletes.as_ref().and_then(|d| d.snapshot_id).is_some()
            || self.later.retired.changed;
        if dry_run {
            RunStatus::DryRun
        } else if !Self::gave_up(&executed.report).is_empty() || !self.later.lost_steps.is_empty() {
            RunStatus::Incomplete
        } else if changed {
            RunStatus::Maintained
        } else {
            RunStatus::Optimal
        }
    }

    fn warnings(&self, format_only: &FormatOnly, report: &CompactionReport) -> Vec<String> {
        let gave_up = Self::gave_up(report);
        [
            format_only.warning(self.format),
            (!gave_up.is_empty()).then(|| {
                format!(
                    "{} degraded partition{} not compacted: another writer's commits kept conflicting ({}); the next \
                     run compacts {}",
                    gave_up.len(),
                    if gave_up.len() == 1 { "" } else { "s" },
                    gave_up.join(", "),
                    if gave_up.len() == 1 { "it" } else { "them" }
                )
            }),
            report.warning.clone(),
            (!self.later.lost_steps.is_empty()).then(|| self.later.lost_steps.join("; ")),
            self.later.deletes.as_ref().and_then(|d| d.warning.clone()),
            self.later.manifests.as_ref().and_then(|m| m.warning.clone()),
            self.later.retired.warning.clone(),
        ]
        .into_iter()
        .flatten()
        .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::PartitionKey;

    #[test]
    fn the_scan_sample_is_a_tenth_of_the_groups_bytes_within_the_cap_and_at_least_one_group() {
        let groups = |mib: &[u64]| -> Vec<GroupFiles> {
            mib.iter()
                .map(|m| GroupFiles {
                    key: PartitionKey { spec_id: 0, values: String::new() },
                    inputs: vec![format!("{m}")],
                    input_bytes: m << 20,
                    outputs: Vec::new(),
                    stitched: false,
                    snapshot_id: None,
                })
                .collect()
        };
        // 1,000 MiB in ten groups of 100: the budget (100 MiB) takes the first group.
        assert_eq!(scan_sample(&groups(&[100; 10]), 256 << 20), vec![0]);
        // 2,000 MiB: budget 200 MiB, but the cap of 150 MiB holds: the first group, then the 50.
        assert_eq!(scan_sample(&groups(&[100, 900, 50, 950]), 150 << 20), vec![0, 2]);
        // Nothing fits the budget: the smallest group.
        assert_eq!(scan_sample(&groups(&[300, 200, 400]), 256 << 20), vec![1]);
        assert!(scan_sample(&[], 256 << 20).is_empty());
    }
}
