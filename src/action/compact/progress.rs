//! Partial progress (`partial_progress`, on for the gate): a compaction commits in batches of
//! whole partitions — at most `max_commits` of them ([`super::batches`]) — so that another writer's
//! conflicting commit costs the batch it hits, not the run; a partition lost to a conflict is
//! planned again on the table's new head and retried, at most [`MAX_RETRIES`] times
//! ([`retry_conflicts`]); and every compacting partition reports what its commit did
//! ([`PartitionOutcome`]: `committed`, `retried 2×, committed`, `conflict: gave up …`).
//!
//! A partition is never split across commits: its figures (files in and out, bytes, purged rows)
//! and its outcome stay exact, and a retry re-plans it whole. Each batch's commit is the
//! format's usual one (rebased onto a moved head only while its inputs are still live and
//! undeleted there), so partial progress changes when files are committed, never which rows a
//! commit holds. A failure other than a conflict stops the run and names what stands.

use std::collections::HashMap;

pub use super::batches::PartitionOutcome;
use super::batches::joined;
use super::run::{CompactionReport, with_what_stands};
use crate::error::Result;
use crate::plan::compaction::{CompactionOptions, Verdict};
use crate::table::{PartitionKey, Table};

/// Re-plans of a partition lost to a conflict, after its first attempt.
pub const MAX_RETRIES: u32 = 2;

/// One compaction of a table with some options and a known output ratio (`compact`'s own).
pub type OneCompaction<'a> = dyn Fn(&Table, &CompactionOptions, Option<f64>) -> Result<CompactionReport> + 'a;

/// With `options.partial_progress`, plans every partition `report` lost to a conflict again on
/// the table's new head and compacts it there (`once`: one compaction of a table), up to
/// [`MAX_RETRIES`] times; a partition still lost after them is skipped with its reason. Its
/// earlier attempts' figures give way to the last attempt's plan, which read the head it
/// committed to.
pub fn retry_conflicts(
    table: &Table,
    options: &CompactionOptions,
    mut report: CompactionReport,
    once: &OneCompaction<'_>,
) -> Result<CompactionReport> {
    for attempt in 2..=MAX_RETRIES + 1 {
        let mut lost: Vec<PartitionKey> =
            report.outcomes.iter().filter(|(_, o)| o.gave_up()).map(|(k, _)| k.clone()).collect();
        if lost.is_empty() {
            break;
        }
        lost.sort();
        crate::progress_lines::line(|| {
            format!("planning {} partition(s) lost to conflicts again on the new head (attempt {attempt})", lost.len())
        });
        let head = table.reload().map_err(|e| with_what_stands(e, &report))?;
        let only = CompactionOptions { only: Some(lost.clone()), ..options.clone() };
        let again = once(&head, &only, report.output_ratio).map_err(|e| with_what_stands(e, &report))?;
        absorb(&mut report, again, &lost, attempt);
    }
    for plan in &mut report.plans {
        if let Some(outcome) = report.outcomes.get(&plan.key).filter(|o| o.gave_up()) {
            plan.skip(&outcome.describe());
        }
    }
    let skipped: Vec<&PartitionKey> = report.outcomes.iter().filter(|(_, o)| o.gave_up()).map(|(k, _)| k).collect();
    report.groups.retain(|g| !skipped.contains(&&g.key));
    Ok(report)
}

/// Takes the attempt `again` made (number `attempt`) at the partitions `lost` into `report`:
/// their plans, groups and outcomes become the new attempt's; its commit becomes the report's
/// latest.
fn absorb(report: &mut CompactionReport, again: CompactionReport, lost: &[PartitionKey], attempt: u32) {
    let mut new_plans: HashMap<PartitionKey, _> =
        again.plans.into_iter().filter(|p| lost.contains(&p.key)).map(|p| (p.key.clone(), p)).collect();
    for key in lost {
        let outcome = report.outcomes.get_mut(key).expect("a lost partition has an outcome");
        outcome.attempts = attempt;
        match new_plans.remove(key) {
            Some(plan) if plan.verdict == Verdict::Compact => {
                let fresh = again.outcomes.get(key).cloned();
                outcome.conflict = fresh.as_ref().and_then(|o| o.conflict.clone());
                outcome.snapshot_id = fresh.and_then(|o| o.snapshot_id);
                replace_plan(report, plan);
            }
            Some(plan) => {
                outcome.conflict = None;
                outcome.settled = Some(plan.reason.clone());
                replace_plan(report, plan);
            }
            None => {
                outcome.conflict = None;
                outcome.settled = Some("its files are gone".into());
                if let Some(p) = report.plans.iter_mut().find(|p| &p.key == key) {
                    p.skip("its files were removed by another writer while compacting");
                }
            }
        }
    }
    report.groups.retain(|g| !lost.contains(&g.key));
    report.groups.extend(again.groups.into_iter().filter(|g| lost.contains(&g.key)));
    report.written.extend(again.written);
    if again.snapshot_id.is_some() {
        report.snapshot_id = again.snapshot_id;
        report.metadata_location = again.metadata_location;
    }
    report.warning = joined(report.warning.take(), again.warning);
    for (key, why) in again.not_stitched.into_iter().filter(|(k, _)| lost.contains(k)) {
        report.not_stitched.insert(key, why);
    }
}

/// Puts `plan` in place of the report's plan of the same partition.
fn replace_plan(report: &mut CompactionReport, plan: crate::plan::compaction::PartitionPlan) {
    if let Some(p) = report.plans.iter_mut().find(|p| p.key == plan.key) {
        *p = plan;
    }
}
