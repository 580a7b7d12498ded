//! The compaction flow shared by every format: plan, choose the partitions whose row groups are
//! stitched rather than re-encoded ([`crate::action::compact::stitch`]), measure the re-encoding's
//! output ratio and plan the others again, let the format skip what it cannot rewrite, rewrite
//! unit by unit (answering Ctrl-C between them), commit once — or, with partial progress, in
//! batches ([`super::progress`]) — and on any failure remove every file the failed commit would
//! have added (`Rewrite`, `run`); the rows of a sorted layout written in order (`copy_in_order`).

use std::collections::HashMap;
use std::path::Path;

use super::batches::{self, PartitionOutcome};
use crate::action::layout::OrderedRows;
use crate::duck::{HostDb, Nested, quote_ident};
use crate::error::{Error, ErrorKind, Result};
use crate::interrupt;
use crate::plan::compaction::{CompactionOptions, PartitionPlan, Verdict, plan_with_settled};
use crate::plan::layout::Layout;
use crate::plan::partition_selection::check_selected;
use crate::profile::PartitionProfile;
use crate::table::{DataFile, PartitionKey};

/// What a compaction did (or, dry, would do).
#[derive(Debug, Clone)]
pub struct CompactionReport {
    /// One plan per partition, in profile order.
    pub plans: Vec<PartitionPlan>,
    /// The committed snapshot, if any.
    pub snapshot_id: Option<i64>,
    /// The metadata file now current, if a snapshot was committed.
    pub metadata_location: Option<String>,
    /// Whether nothing was written on purpose.
    pub dry_run: bool,
    /// Output bytes per input byte measured on a sample, which the plan's groups are sized by
    /// (`None`: not measured, groups sized on input bytes).
    pub output_ratio: Option<f64>,
    /// The data files the committed snapshot added.
    pub written: Vec<String>,
    /// Every planned rewrite unit, in plan order ([`GroupFiles`]): its input files (as the
    /// table names them), their bytes, and after a commit the files it became.
    pub groups: Vec<GroupFiles>,
    /// The layout the files are (or would be) written in ([`Layout::label`]: `binpack`,
    /// `sort(…)`, `zorder(…)`).
    pub layout: Layout,
    /// What went wrong after the commit point without undoing the commit (a version hint that
    /// could not be moved, a post-commit checkpoint that failed), or where written files went
    /// instead of where the table's properties ask (`Rewrite::notice`), for the caller to show.
    pub warning: Option<String>,
    /// Per compacting partition that is re-encoded: why its row groups are not stitched.
    pub not_stitched: HashMap<PartitionKey, String>,
    /// Per compacting partition of a real run: what its commit did ([`PartitionOutcome`]).
    pub outcomes: HashMap<PartitionKey, PartitionOutcome>,
}

impl CompactionReport {
    /// How partition `key`'s groups are (or would be) written — `stitch` (row groups copied,
    /// [`crate::action::compact::stitch`]), `re-encode`, or both — and, when some are
    /// re-encoded, why they are not stitched; `(None, None)` when it has no group.
    pub fn method(&self, key: &PartitionKey) -> (Option<&'static str>, Option<&str>) {
        let mut groups = self.groups.iter().filter(|g| &g.key == key).peekable();
        if groups.peek().is_none() {
            return (None, None);
        }
        let (mut stitched, mut encoded) = (false, false);
        for g in groups {
            stitched |= g.stitched;
            encoded |= !g.stitched;
        }
        let method = match (stitched, encoded) {
            (true, false) => "stitch",
            (false, _) => "re-encode",
            (true, true) => "stitch, re-encode",
        };
        (Some(method), self.not_stitched.get(key).filter(|_| encoded).map(String::as_str))
    }
}

/// A rewrite's commit, as [`Rewrite::commit`] reports it.
pub(crate) struct Committed {
    /// The snapshot id (Iceberg) or version (Delta).
    pub id: i64,
    /// The metadata file or log entry that holds it.
    pub location: String,
    /// See [`CompactionReport::warning`].
    pub warning: Option<String>,
    /// Per partition, the delete files the commit removed as dangling.
    pub deletes_removed: HashMap<PartitionKey, u64>,
}

/// One rewrite unit's inputs and outputs ([`CompactionReport::groups`]): a bin-pack group
/// (one output file), or a whole partition of a sorted layout (its files, in order).
#[derive(Debug, Clone, PartialEq)]
pub struct GroupFiles {
    /// The partition.
    pub key: PartitionKey,
    /// Input files, as the table names them.
    pub inputs: Vec<String>,
    /// Their bytes.
    pub input_bytes: u64,
    /// The files written, once committed (none: not committed, or every row deleted).
    pub outputs: Vec<String>,
    /// Whether its row groups are (or would be) stitched rather than re-encoded
    /// ([`crate::action::compact::stitch`]).
    pub stitched: bool,
    /// The commit that committed it (none: dry, or not committed).
    pub snapshot_id: Option<i64>,
}

/// What a table format contributes to a compaction. The flow around it is [`run`]'s: plan,
/// measure the rewrite's output ratio and plan again, let the format skip what it cannot
/// rewrite, rewrite group by group (answering Ctrl-C between groups), commit once (or per batch,
/// [`super::progress`]), and on any failure remove every file the failed commit would have
/// added, so the table is exactly as it was (or as the batches committed before left it).
pub(crate) trait Rewrite {
    /// A rewritten group, ready for the commit.
    type Written;
    /// What the format's delete files are called in a skip reason.
    const DELETES: &'static str = "delete files";
    /// Whether the rewrite applies delete files (else partitions with deletes are skipped).
    const APPLIES_DELETES: bool = false;
    /// Whether the format's deletes are per data file, so that a file degraded by its deleted
    /// rows is rewritten (`delete_ratio_threshold`, [`crate::plan::compaction`]).
    const PURGES: bool = false;
    /// The `delete_ratio_threshold` when the user gives none.
    const DEFAULT_DELETE_RATIO: f64 = crate::plan::compaction::DELTA_DELETE_RATIO_THRESHOLD;
    /// The live files, in the model the planner takes (of every partition not
    /// [`Rewrite::settled`]).
    fn files(&self) -> &[DataFile];
    /// Partitions profiled without their files, each needing no compaction, planned from their
    /// figures alone (an Iceberg table of a million files reads only the files of the partitions
    /// that may need it).
    fn settled(&self) -> &[PartitionProfile] {
        &[]
    }
    /// The table's root ([`crate::store::TableRoot`]).
    fn root(&self) -> &crate::store::TableRoot;
    /// The layout the rewrite writes.
    fn layout(&self) -> Layout;
    /// Why written files go elsewhere than the table's properties ask (a data path outside the
    /// table's root), for the report's warning.
    fn notice(&self) -> Option<String> {
        None
    }
    /// The partitions whose time range ends after `now - window` (µs since the epoch), which
    /// `skip_recent_partitions` holds back.
    fn recent(&self, _now: i64, _window: i64) -> Vec<PartitionKey> {
        Vec::new()
    }
    /// The COPY of the planned files `group` into `target` (also what the calibration runs).
    fn copy_sql(&self, conn: &Nested, group: &[usize], target: &str) -> Result<String>;
    /// Why the planned files `group` cannot be stitched into one file
    /// ([`crate::action::compact::stitch`]), or `None` when they can; asked of bin-pack groups
    /// only, unless the user turned stitching off.
    fn stitch_refusal(&self, _conn: &Nested, _group: &[usize]) -> Option<String> {
        Some("the format does not stitch".into())
    }
    /// Why the table may only be stitched, never re-encoded (a column whose bytes only a copy
    /// keeps), if so: every partition not stitched is then skipped with this reason and why it
    /// is not stitched, and the output ratio is not measured (the format's `copy_sql` refuses).
    fn stitch_only(&self) -> Option<String> {
        None
    }
    /// Skips, with the reason, planned partitions this format cannot rewrite safely.
    fn skip_unsafe(&self, _conn: &Nested, _plans: &mut [PartitionPlan]) -> Result<()> {
        Ok(())
    }
    /// Refuses a real run that could not commit safely.
    fn check_commit(&self) -> Result<()> {
        Ok(())
    }
    /// Rewrites the planned files `group` of partition `plan` into `outputs` files (more than
    /// one only for a sorted layout, which rewrites a whole partition at once: [`Unit`]); the
    /// first written carries every replaced input. With `stitch` (a group
    /// [`Rewrite::stitch_refusal`] accepted) its row groups are copied, not re-encoded.
    fn rewrite(
        &self,
        conn: &Nested,
        plan: &PartitionPlan,
        group: &[usize],
        outputs: usize,
        stitch: bool,
    ) -> Result<Vec<Self::Written>>;
    /// Where a written file is on disk.
    fn local_path(written: &Self::Written) -> &Path;
    /// The written file as the table names it once committed (`None`: nothing was added).
    fn output(written: &Self::Written) -> Option<String>;
    /// Whether the layout sorts (then a partition is rewritten as one [`Unit`]).
    fn sorts(&self) -> bool {
        !matches!(self.layout(), Layout::Binpack)
    }
    /// Why the rewrite must be committed in one batch even with partial progress, if it must.
    fn one_commit(&self) -> Option<&'static str> {
        None
    }
    /// Commits everything written; `moved`: an earlier batch of this rewrite committed, so the
    /// table's head is no longer the state read (the commit starts from the head, once checked
    /// that the rewrite still holds there). An error means nothing was committed (the flow then
    /// removes what was written), except [`ErrorKind::CommitUnknown`], after which every file is
    /// kept.
    fn commit(&self, written: &[Self::Written], moved: bool) -> Result<Committed>;
}

/// The compaction flow shared by every format ([`Rewrite`]): plan, measure the output ratio and
/// plan again on it, then rewrite and commit batch by batch ([`commit_batches`]).
pub(crate) fn run<R: Rewrite>(
    rewrite: &R,
    options: &CompactionOptions,
    dry_run: bool,
    host: &HostDb,
    known_ratio: Option<f64>,
) -> Result<CompactionReport> {
    let files = rewrite.files();
    let adjusted = adjusted_options(rewrite, options);
    let options = &adjusted;
    let first_plan = plan_with_settled(files, rewrite.settled(), options, 1.0, R::DELETES);
    // A re-plan after a conflict (`only`) was checked on its first plan.
    if options.only.is_none() {
        check_selected(&first_plan, options.partitions.as_deref())?;
    }
    let mut report = CompactionReport {
        plans: first_plan,
        snapshot_id: None,
        metadata_location: None,
        dry_run,
        output_ratio: None,
        written: Vec::new(),
        groups: Vec::new(),
        layout: rewrite.layout(),
        warning: None,
        not_stitched: HashMap::new(),
        outcomes: HashMap::new(),
    };
    if report.plans.iter().all(|p| p.groups.is_empty()) {
        return Ok(report);
    }
    report.warning = rewrite.notice();
    // Plan again on the sizes the rewrite will produce (a dry run measures too: the sample goes
    // to /dev/null, so the plan it shows is the plan a real run carries out).
    let conn = host.connect()?;
    // Held until the rewrite is done: DuckDB reads and writes the table's files with it.
    let access = crate::store::prepare_remote(&conn, rewrite.root())?;
    report.warning = batches::joined(report.warning.take(), access.notice.clone());
    let mut stitched = stitchable(rewrite, &conn, options, &mut report);
    let ratio = known_ratio.or_else(|| {
        measured_output_ratio(&conn, &report.plans, &stitched, &|i| files[i].size_bytes, &|sample, target| {
            rewrite.copy_sql(&conn, sample, target)
        })
    });
    if let Some(r) = ratio
        && (r - 1.0).abs() > 0.1
    {
        replan_at_ratio(rewrite, options, r, &mut report, &mut stitched);
    }
    report.output_ratio = ratio;
    rewrite.skip_unsafe(&conn, &mut report.plans)?;
    if let Some(why) = rewrite.stitch_only() {
        skip_unstitched(&why, &mut report, &stitched);
    }
    let units = units(&report.plans, rewrite.sorts(), &stitched);
    report.groups = units
        .iter()
        .map(|u| GroupFiles {
            key: report.plans[u.plan].key.clone(),
            inputs: u.files.iter().map(|&i| files[i].path.clone()).collect(),
            input_bytes: u.files.iter().map(|&i| files[i].size_bytes).sum(),
            outputs: Vec::new(),
            stitched: u.stitch,
            snapshot_id: None,
        })
        .collect();
    if dry_run || report.plans.iter().all(|p| p.groups.is_empty()) {
        return Ok(report);
    }
    rewrite.check_commit()?;
    if rewrite.sorts() {
        // Rows keep the layout's ORDER BY into the files only with insertion order preserved,
        // which a DuckDB that cannot set it per session may not guarantee.
        conn.require_ordered_writes()?;
    }
    commit_batches(rewrite, &conn, options, &units, &mut report)?;
    Ok(report)
}

/// `options` as format `R` takes them: no delete thresholds where it applies no deletes, its
/// default delete ratio where it purges, and the partitions written recently held back.
fn adjusted_options<R: Rewrite>(rewrite: &R, options: &CompactionOptions) -> CompactionOptions {
    let mut adjusted = options.clone();
    if !R::APPLIES_DELETES {
        adjusted.apply_deletes = false;
    }
    adjusted.delete_ratio_threshold =
        if R::PURGES { Some(options.delete_ratio_threshold.unwrap_or(R::DEFAULT_DELETE_RATIO)) } else { None };
    if !R::APPLIES_DELETES {
        adjusted.delete_file_threshold = None;
    }
    if let Some(window) = options.recent_window {
        adjusted.recent.extend(rewrite.recent(chrono::Utc::now().timestamp_micros(), window));
    }
    adjusted
}

/// Per plan of `report`, whether every group of it can be stitched (such partitions keep the
/// plan on input bytes: stitching writes what it reads); why not is recorded in the report.
fn stitchable<R: Rewrite>(
    rewrite: &R,
    conn: &Nested,
    options: &CompactionOptions,
    report: &mut CompactionReport,
) -> Vec<bool> {
    let mut stitched: Vec<bool> = Vec::with_capacity(report.plans.len());
    for p in &report.plans {
        if p.verdict != Verdict::Compact {
            stitched.push(false);
            continue;
        }
        let refusal = if !options.stitch {
            Some("stitch := false".to_string())
        } else if rewrite.sorts() {
            Some(format!("the {} layout orders rows anew", rewrite.layout().label()))
        } else {
            p.groups.iter().find_map(|g| rewrite.stitch_refusal(conn, g))
        };
        stitched.push(refusal.is_none());
        if let Some(why) = refusal {
            report.not_stitched.insert(p.key.clone(), why);
        }
    }
    stitched
}

/// Skips every compacting plan of `report` that is not `stitched`, for `why` (the table may
/// only be stitched, [`Rewrite::stitch_only`]) and why it is not stitched.
fn skip_unstitched(why: &str, report: &mut CompactionReport, stitched: &[bool]) {
    for (i, p) in report.plans.iter_mut().enumerate() {
        if p.verdict != Verdict::Compact || stitched.get(i).copied().unwrap_or(false) {
            continue;
        }
        let not = report.not_stitched.remove(&p.key).unwrap_or_else(|| "it is not stitched".into());
        p.skip(&format!("{why}, and its files cannot be stitched: {not}"));
    }
}

/// Plans again at the output `ratio`: the plans of partitions not stitched are replaced, or,
/// when the new plan has other partitions, every plan is (and none is stitched).
fn replan_at_ratio<R: Rewrite>(
    rewrite: &R,
    options: &CompactionOptions,
    ratio: f64,
    report: &mut CompactionReport,
    stitched: &mut Vec<bool>,
) {
    let replanned = plan_with_settled(rewrite.files(), rewrite.settled(), options, ratio, R::DELETES);
    if replanned.len() == report.plans.len() && replanned.iter().zip(&report.plans).all(|(a, b)| a.key == b.key) {
        for (i, plan) in replanned.into_iter().enumerate() {
            if !stitched[i] {
                report.plans[i] = plan;
            }
        }
    } else {
        for p in report.plans.iter().zip(stitched.iter()).filter(|(_, s)| **s).map(|(p, _)| p) {
            report.not_stitched.insert(p.key.clone(), "the plan changed".into());
        }
        report.plans = replanned;
        *stitched = vec![false; report.plans.len()];
    }
}

/// Rewrites and commits `units`, one commit per batch of whole partitions (one batch without
/// partial progress, or when the format must commit once); a batch lost to a conflict with
/// partial progress is recorded in its partitions' outcomes and its files removed.
fn commit_batches<R: Rewrite>(
    rewrite: &R,
    conn: &Nested,
    options: &CompactionOptions,
    units: &[Unit],
    report: &mut CompactionReport,
) -> Result<()> {
    let max_commits = match (options.partial_progress, rewrite.one_commit()) {
        (true, None) => options.max_commits,
        (true, Some(why)) => {
            crate::progress_lines::line(|| format!("committing in one batch: {why}"));
            1
        }
        (false, _) => 1,
    };
    let unit_plans: Vec<usize> = units.iter().map(|u| u.plan).collect();
    for batch in batches::batches(&unit_plans, max_commits) {
        let stands = what_stands(report);
        let mut written: Vec<R::Written> = Vec::new();
        // Per unit of the batch: its range in `written`.
        let mut spans: Vec<std::ops::Range<usize>> = Vec::new();
        let result = (|| {
            for (u, unit) in units.iter().enumerate().take(batch.end).skip(batch.start) {
                interrupt::check(&stands)?;
                let start = written.len();
                let plan = &report.plans[unit.plan];
                written.extend(rewrite.rewrite(conn, plan, &unit.files, unit.outputs, unit.stitch)?);
                spans.push(start..written.len());
                crate::progress_lines::line(|| {
                    format!(
                        "{}: group {}/{} rewritten ({:.1} MiB in)",
                        plan.partition,
                        u + 1,
                        units.len(),
                        report.groups[u].input_bytes as f64 / crate::profile::MIB
                    )
                });
            }
            rewrite.commit(&written, report.snapshot_id.is_some())
        })();
        crate::progress_lines::line(|| match &result {
            Ok(c) => format!("committed groups {}-{} of {} (commit {})", batch.start + 1, batch.end, units.len(), c.id),
            Err(e) => format!("groups {}-{} not committed: {}", batch.start + 1, batch.end, e.message()),
        });
        match result {
            Ok(committed) => record_commit::<R>(report, units, batch, &spans, &written, committed),
            Err(e) if e.kind() == ErrorKind::CommitUnknown => return Err(with_what_stands(e, report)),
            Err(e) => {
                crate::store::remove_quietly(written.iter().filter_map(|w| R::local_path(w).to_str()));
                if !(options.partial_progress && e.kind() == ErrorKind::CommitConflict) {
                    return Err(with_what_stands(e, report));
                }
                for unit in &units[batch] {
                    outcome_of(report, unit).conflict = Some(e.message().to_string());
                }
            }
        }
    }
    Ok(())
}

/// Records in `report` the commit of `batch` of `units`, whose files are `written` (per unit of
/// the batch, its `spans` range of them).
fn record_commit<R: Rewrite>(
    report: &mut CompactionReport,
    units: &[Unit],
    batch: std::ops::Range<usize>,
    spans: &[std::ops::Range<usize>],
    written: &[R::Written],
    committed: Committed,
) {
    for (key, removed) in &committed.deletes_removed {
        if let Some(p) = report.plans.iter_mut().find(|p| &p.key == key) {
            p.delete_files_removed += removed;
        }
    }
    report.snapshot_id = Some(committed.id);
    report.metadata_location = Some(committed.location);
    report.written.extend(written.iter().filter_map(R::output));
    report.warning = batches::joined(report.warning.take(), committed.warning);
    for (u, span) in batch.zip(spans) {
        let group = &mut report.groups[u];
        group.outputs = written[span.clone()].iter().filter_map(R::output).collect();
        group.snapshot_id = Some(committed.id);
        let plan = &mut report.plans[units[u].plan];
        plan.files_written = Some(plan.files_written.unwrap_or(0) + group.outputs.len() as u64);
        outcome_of(report, &units[u]).snapshot_id = Some(committed.id);
    }
}

/// The outcome of `unit`'s partition in `report`, a first attempt's until recorded.
fn outcome_of<'r>(report: &'r mut CompactionReport, unit: &Unit) -> &'r mut PartitionOutcome {
    let key = report.plans[unit.plan].key.clone();
    report.outcomes.entry(key).or_insert(PartitionOutcome {
        attempts: 1,
        snapshot_id: None,
        conflict: None,
        settled: None,
    })
}

/// What an interrupted or failed batch leaves standing, for its message: `nothing was
/// committed`, or the partitions earlier batches committed.
fn what_stands(report: &CompactionReport) -> String {
    match report.snapshot_id {
        None => "nothing was committed".into(),
        Some(last) => {
            let labels = committed_labels(report);
            let one = labels.len() == 1;
            format!(
                "nothing more was committed; earlier batches stand ({} of partition{} {}, last commit {last})",
                if one { "the rewrite" } else { "the rewrites" },
                if one { "" } else { "s" },
                labels.join(", ")
            )
        }
    }
}

/// `e`, telling what earlier batches committed when they did.
pub(super) fn with_what_stands(e: Error, report: &CompactionReport) -> Error {
    match report.snapshot_id {
        None => e,
        Some(_) => Error::new(e.kind(), format!("{}; {}", e.message(), what_stands(report))),
    }
}

/// The labels of the partitions committed so far.
fn committed_labels(report: &CompactionReport) -> Vec<String> {
    let mut labels: Vec<String> = Vec::new();
    for g in report.groups.iter().filter(|g| g.snapshot_id.is_some()) {
        if let Some(p) = report.plans.iter().find(|p| p.key == g.key)
            && !labels.contains(&p.partition)
        {
            labels.push(p.partition.clone());
        }
    }
    labels
}

/// One rewrite: a bin-pack group into one file, or, for a sorted layout, every planned file of a
/// partition into as many files as the plan has groups (sorting across the whole partition is
/// what makes files cover disjoint ranges of the sort columns, so readers skip them).
struct Unit {
    /// Index of the partition's plan.
    plan: usize,
    /// Planned files (model indices).
    files: Vec<usize>,
    /// Output files.
    outputs: usize,
    /// Row groups stitched, not re-encoded.
    stitch: bool,
}

/// The rewrites of the compacting plans, in plan order ([`Unit`]); `stitched[i]`: plan `i`'s
/// groups are stitched.
fn units(plans: &[PartitionPlan], sorts: bool, stitched: &[bool]) -> Vec<Unit> {
    let mut out = Vec::new();
    for (i, p) in plans.iter().enumerate().filter(|(_, p)| p.verdict == Verdict::Compact) {
        if sorts {
            let mut files: Vec<usize> = p.groups.iter().flatten().copied().collect();
            files.sort_unstable();
            out.push(Unit { plan: i, files, outputs: p.groups.len(), stitch: false });
        } else {
            let stitch = stitched.get(i).copied().unwrap_or(false);
            out.extend(p.groups.iter().map(|g| Unit { plan: i, files: g.clone(), outputs: 1, stitch }));
        }
    }
    out
}

/// Writes `rows` (in their order) as `targets.len()` files of even row counts: one `COPY` for
/// one file; for more, the rows are numbered once in their order (`row_number()` into a column
/// of a temporary table, named per run so no column of the table can shadow it) and each file
/// is a `COPY` of its range of numbers, so the files cover consecutive, disjoint runs of the
/// order and every row lands in exactly one. `copy_to(select, target)` makes a file's `COPY`.
/// Returns (rows, bytes) per file (a file may get no row when there are fewer rows than files).
pub(crate) fn copy_in_order(
    conn: &Nested,
    rows: &OrderedRows,
    targets: &[String],
    copy_to: &dyn Fn(&str, &str) -> String,
) -> Result<Vec<(u64, u64)>> {
    if let [one] = targets {
        return Ok(vec![conn.query(&copy_to(&rows.sql(), one))?.copy_stats()?]);
    }
    let run = uuid::Uuid::new_v4().simple().to_string();
    let temp = format!("__lakehouse_sorted_{run}");
    let position = quote_ident(&format!("__lakehouse_position_{run}"));
    let window = if rows.order.is_empty() { String::new() } else { format!("ORDER BY {}", rows.order.join(", ")) };
    conn.execute(&format!(
        "CREATE TEMPORARY TABLE {temp} AS SELECT row_number() OVER ({window}) AS {position}, * FROM ({}) AS __lakehouse_rows",
        rows.select
    ))?;
    let result = (|| {
        let total = conn.query(&format!("SELECT count(*) FROM {temp}"))?.first("count")?[0].int()?.max(0) as u64;
        let n = targets.len() as u64;
        targets
            .iter()
            .enumerate()
            .map(|(i, target)| {
                // Numbers run 1..=total: file i takes (total·i/n, total·(i+1)/n].
                let (from, to) = (total * i as u64 / n, total * (i as u64 + 1) / n);
                let range = format!(
                    "SELECT * EXCLUDE ({position}) FROM {temp} WHERE {position} > {from} AND {position} <= {to} \
                     ORDER BY {position} ASC"
                );
                conn.query(&copy_to(&range, target))?.copy_stats()
            })
            .collect::<Result<Vec<_>>>()
    })();
    let dropped = conn.execute(&format!("DROP TABLE IF EXISTS {temp}"));
    let out = result?;
    dropped?;
    Ok(out)
}

/// Input bytes rewritten to `/dev/null` to measure how the rewrite changes sizes.
const CALIBRATION_SAMPLE_BYTES: u64 = 16 * 1024 * 1024;
/// At most this many files in the sample: 16 MiB of 2 KiB files would be 8,000 files, whose
/// reading (footers, a scan each) costs seconds and hundreds of MiB to measure what a few hundred
/// show as well.
const CALIBRATION_SAMPLE_FILES: usize = 256;

/// Output bytes per input byte of a rewrite, measured by rewriting a sample of the files the
/// plan compacts and re-encodes (`stitched[i]`: plan `i` is stitched instead; up to
/// [`CALIBRATION_SAMPLE_BYTES`] in at most [`CALIBRATION_SAMPLE_FILES`] files from the largest
/// such partition) to `/dev/null`:
/// a change of codec (Snappy in, zstd out) or many per-file footers make outputs much smaller
/// than their inputs, and planning on input bytes alone would miss the target by as much.
/// `size_of` gives a planned file's size, `copy_to` the format's COPY of some planned files to a
/// target. Writes nothing anywhere; `None` when it cannot be measured.
fn measured_output_ratio(
    conn: &Nested,
    plans: &[PartitionPlan],
    stitched: &[bool],
    size_of: &dyn Fn(usize) -> u64,
    copy_to: &dyn Fn(&[usize], &str) -> Result<String>,
) -> Option<f64> {
    let largest = plans
        .iter()
        .zip(stitched)
        .filter(|(p, stitched)| p.verdict == Verdict::Compact && !**stitched)
        .map(|(p, _)| p)
        .max_by_key(|p| p.bytes_to_rewrite)?;
    // Files in manifest (arrival) order, not the groups' largest-first order, so that the
    // sample has the partition's mix of sizes (and footers); none that would overshoot the cap,
    // but at least one.
    let mut members: Vec<usize> = largest.groups.iter().flatten().copied().collect();
    members.sort_unstable();
    let mut sample: Vec<usize> = Vec::new();
    let mut sample_bytes = 0u64;
    for i in members {
        if sample.len() == CALIBRATION_SAMPLE_FILES {
            break;
        }
        let size = size_of(i);
        if !sample.is_empty() && sample_bytes + size > CALIBRATION_SAMPLE_BYTES {
            continue;
        }
        sample.push(i);
        sample_bytes += size;
    }
    let sql = copy_to(&sample, "/dev/null").ok()?;
    let written = conn.query(&sql).ok()?.copy_stats().ok()?.1;
    let ratio = written as f64 / sample_bytes.max(1) as f64;
    (ratio.is_finite() && ratio > 0.0).then(|| ratio.clamp(MIN_OUTPUT_RATIO, MAX_OUTPUT_RATIO))
}

/// Bounds on the measured ratio, so that one odd sample cannot make groups absurd.
const MIN_OUTPUT_RATIO: f64 = 1.0 / 32.0;
const MAX_OUTPUT_RATIO: f64 = 32.0;
