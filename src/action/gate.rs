//! The maintenance gate: profile → verdict → compact only the degraded partitions → rewrite
//! bloated position deletes → merge bloated manifests → expire snapshots past retention →
//! re-profile → measured scorecard → Slack.
//!
//! Nothing half-done: every commit is atomic (compaction's one per batch of partitions with
//! partial progress, [`crate::action::compact::progress`]; expiry's one); a failure
//! anywhere posts the failure alert (table and execution id) and raises. A failed Slack post
//! never undoes maintenance: it is reported in the scorecard (and raised only when asked).

use std::collections::HashSet;
use std::time::Instant;

use crate::action::compact::{CompactionReport, GroupFiles};
use crate::action::executor::{Executed, ExecutorOptions, Opened, compact_with_executor};
use crate::action::expire_snapshots::{ExpiryOptions, ExpiryReport, expire, retention_days_in_force};
use crate::action::rewrite_manifests::{
    ManifestsToMerge, RewriteManifestsOptions, RewriteManifestsReport, rewrite_manifests,
};
use crate::action::rewrite_position_deletes::{
    RewritePositionDeletesOptions, RewritePositionDeletesReport, rewrite_position_deletes,
};
use crate::action::scan::scan;
use crate::action::vacuum::{VacuumOptions, vacuum};
use crate::duck::HostDb;
use crate::error::{Error, ErrorKind, Result};
use crate::notify::card;
use crate::notify::slack::{Delivery, RetryPolicy, Webhook, post};
use crate::plan::compaction::{CompactionOptions, Verdict};
use crate::plan::format_options::FormatOnly;
use crate::plan::partition_selection::check_selected;
use crate::plan::projection;
use crate::profile::{summarize, table_profile, table_profile_for_planning};
use crate::report::{LineVerdict, PartitionLine, RunStatus, Scorecard};
use crate::table::{LocateOptions, PartitionKey, Table, TableFormat};

/// Everything a gate run takes.
#[derive(Debug, Clone, Default)]
pub struct GateOptions {
    /// The table as the user named it.
    pub table: String,
    /// How to resolve it.
    pub locate: LocateOptions,
    /// Thresholds, target and limits of the compaction.
    pub compaction: CompactionOptions,
    /// Who rewrites: here, Spark, or by size.
    pub executor: ExecutorOptions,
    /// Retention of the expiry (its `dry_run` is the gate's).
    pub expiry: ExpiryOptions,
    /// Plan only: change nothing, post nothing.
    pub dry_run: bool,
    /// Where the card goes (none: no post).
    pub webhook: Option<Webhook>,
    /// Post a card when the table is already optimal.
    pub notify_when_healthy: bool,
    /// Raise when the card cannot be delivered.
    pub fail_on_notify_error: bool,
    /// Time scans of the compacted partitions before and after.
    pub measure_speedup: bool,
    /// Delivery policy.
    pub retry: RetryPolicy,
    /// The options given that apply to one format only: on a table of the other format they are
    /// ignored and the scorecard's warnings name them (one template serves tables of both
    /// formats: [`crate::plan::format_options`]).
    pub format_only: FormatOnly,
}

/// Runs the gate. On failure the alert is posted (when a webhook is set) and the error raised.
pub fn run_gate(options: &GateOptions, host: &HostDb) -> Result<Scorecard> {
    run_gate_as(options, host, &uuid::Uuid::new_v4().to_string())
}

/// [`run_gate`] under a given execution id (the webhook server hands it out before the run).
pub fn run_gate_as(options: &GateOptions, host: &HostDb, execution_id: &str) -> Result<Scorecard> {
    let execution_id = execution_id.to_string();
    let started = Instant::now();
    match gate(options, host, &execution_id, started) {
        Ok(mut scorecard) => {
            deliver(options, &mut scorecard)?;
            Ok(scorecard)
        }
        Err(e) => Err(alert_failure(options, &execution_id, e)),
    }
}

/// Posts the failure alert for run `execution_id` (when a webhook is set and it is no dry run)
/// and returns the error to raise: `e`, saying whether the alert went out, with the execution id.
/// The gate's own failures come through here; the webhook server sends its others (a run that
/// could not be recorded, a panic) through it too, so every failed run alerts.
pub fn alert_failure(options: &GateOptions, execution_id: &str, e: Error) -> Error {
    let mut message = e.to_string();
    if let Some(webhook) = &options.webhook
        && !options.dry_run
    {
        let delivery = post(
            webhook,
            &card::failure_payload(
                &options.table,
                crate::table::detect_format(&options.table),
                execution_id,
                &message,
                e.kind().is_retryable(),
            ),
            &options.retry,
        );
        message.push_str(
            if delivery.ok {
                " (the failure alert was posted to Slack)".into()
            } else {
                format!(" (the failure alert could not be posted: {})", delivery.describe())
            }
            .as_str(),
        );
    }
    Error::new(e.kind(), format!("{message} [execution {execution_id}]"))
}

fn deliver(options: &GateOptions, scorecard: &mut Scorecard) -> Result<()> {
    let optimal = scorecard.status == RunStatus::Optimal;
    scorecard.notification = match (&options.webhook, scorecard.dry_run) {
        (_, true) => "not sent: dry run".into(),
        (None, _) => "not sent: no webhook URL (slack_webhook_url or SLACK_WEBHOOK_URL)".into(),
        (Some(_), false) if optimal && !options.notify_when_healthy => {
            "not sent: table is optimal (notify_when_healthy := true posts it)".into()
        }
        (Some(webhook), false) => {
            // The card reports its own delivery as pending; the row carries the outcome.
            let delivery: Delivery = post(webhook, &card::scorecard_payload(scorecard), &options.retry);
            if !delivery.ok && options.fail_on_notify_error {
                return Err(Error::new(
                    ErrorKind::Io,
                    format!(
                        "maintenance finished (execution {}) but the Slack card was not delivered: {}",
                        scorecard.execution_id,
                        delivery.describe()
                    ),
                ));
            }
            delivery.describe()
        }
    };
    Ok(())
}

/// What retiring history did: Iceberg's snapshot expiry, Delta's VACUUM.
struct Retired {
    /// The retention in force, days.
    retention_days: f64,
    /// Snapshots expired (Iceberg; Delta's VACUUM expires no versions).
    snapshots_expired: u64,
    /// Files deleted (or, dry, that would be) and their bytes.
    files_deleted: u64,
    /// See `files_deleted`.
    bytes_reclaimed: u64,
    /// Whether the table changed (a commit, or files deleted).
    changed: bool,
    /// See [`crate::report::Scorecard::warnings`].
    warning: Option<String>,
}

impl Retired {
    /// Nothing retired (the step was left for the next run): the retention in force, no change.
    fn nothing(table: &Table, options: &GateOptions) -> Retired {
        let retention_days = match table {
            Table::Iceberg { table, .. } => retention_days_in_force(&table.metadata, &options.expiry),
            Table::Delta(table) => options.expiry.retention_days.unwrap_or_else(|| {
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

/// The outcome of a maintenance `step` run after the compaction (which committed `compaction`, a
/// `commit` — `snapshot` or `version` — when it did). With partial progress, a
/// [`ErrorKind::CommitConflict`] (another writer's commits kept winning) becomes `None` and a
/// line in `lost` (`{step} was left for the next run: …`); any other error names the compaction's
/// commit, which stands.
fn after_compaction<T>(
    result: Result<Option<T>>,
    options: &GateOptions,
    (step, commit): (&str, &str),
    compaction: Option<i64>,
    lost: &mut Vec<String>,
) -> Result<Option<T>> {
    match result {
        Err(e) if e.kind() == ErrorKind::CommitConflict && options.compaction.partial_progress => {
            lost.push(format!("{step} was left for the next run: {}", e.message()));
            Ok(None)
        }
        Err(e) => Err(match compaction {
            Some(id) => Error::new(
                e.kind(),
                format!("{step} failed after the compaction committed {commit} {id} (which stands): {e}"),
            ),
            None => e,
        }),
        ok => ok,
    }
}

/// Expires snapshots (Iceberg) or vacuums (Delta) past the retention, also when nothing was
/// compacted. Delta's retention is `snapshot_retention_days` when given, else the table's
/// `delta.deletedFileRetentionDuration`; one below the table's is refused, as VACUUM refuses it.
fn retire_history(table: &Table, options: &GateOptions, host: &HostDb) -> Result<Retired> {
    match table {
        Table::Iceberg { located, table } => {
            let expiry_options = ExpiryOptions { dry_run: options.dry_run, ..options.expiry.clone() };
            let expiry: ExpiryReport = expire(located, &expiry_options)?;
            Ok(Retired {
                retention_days: retention_days_in_force(&table.metadata, &options.expiry),
                snapshots_expired: expiry.expired.len() as u64,
                files_deleted: expiry.files.iter().filter(|f| f.removed()).count() as u64,
                bytes_reclaimed: expiry.reclaimed_bytes(),
                changed: expiry.metadata_location.is_some(),
                warning: expiry.warning,
            })
        }
        Table::Delta(table) => {
            let vacuum_options = VacuumOptions {
                retention_hours: options.expiry.retention_days.map(|d| d * 24.0),
                dry_run: options.dry_run,
                enforce_retention_duration: true,
                lite: false,
            };
            let report = vacuum(table, &vacuum_options, host)?;
            Ok(Retired {
                retention_days: report.retention_hours / 24.0,
                snapshots_expired: 0,
                files_deleted: report.removed(),
                bytes_reclaimed: report.reclaimed_bytes(),
                changed: !options.dry_run && report.removed() > 0,
                warning: None,
            })
        }
    }
}

/// Merges the small manifests of an Iceberg table whose manifests are bloated: a content and
/// spec group of at least `commit.manifest.min-count-to-merge` manifests (Iceberg's default 100,
/// the count at which Java writers merge on commit), small ones making up at least the
/// fragmentation ratio threshold of them. `None` for Delta and for tables this version does
/// not rewrite.
fn merge_manifests(table: &Table, options: &GateOptions) -> Result<Option<RewriteManifestsReport>> {
    let Table::Iceberg { located, table } = table else { return Ok(None) };
    if table.require_rewritable().is_err() {
        return Ok(None);
    }
    let merge_options = RewriteManifestsOptions {
        target_bytes: None,
        dry_run: options.dry_run,
        min_small_share: Some(options.compaction.thresholds.fragmentation_ratio_threshold),
        min_manifests: ManifestsToMerge::TableSetting,
    };
    Ok(Some(rewrite_manifests(located, &merge_options)?))
}

/// Rewrites the position deletes of an Iceberg table where they are bloated
/// ([`rewrite_position_deletes`] with its defaults: a partition with two or more position delete
/// files, or positions that delete no live row; on format v3, any v2 position delete, made a
/// deletion vector). `None` for Delta and for tables this version does not rewrite.
fn rewrite_deletes(
    table: &Table,
    options: &GateOptions,
    host: &HostDb,
) -> Result<Option<RewritePositionDeletesReport>> {
    let Table::Iceberg { located, table } = table else { return Ok(None) };
    if table.require_rewritable().is_err() {
        return Ok(None);
    }
    let rewrite_options = RewritePositionDeletesOptions { dry_run: options.dry_run, ..Default::default() };
    Ok(Some(rewrite_position_deletes(located, &rewrite_options, host)?))
}

/// Scans per measured speedup: one to warm the cache, one timed (the best counts).
const SCAN_RUNS: u32 = 2;

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

fn gate(options: &GateOptions, host: &HostDb, execution_id: &str, started: Instant) -> Result<Scorecard> {
    options.compaction.validate()?;
    options.expiry.validate()?;
    let started_ms = chrono::Utc::now().timestamp_millis();
    let thresholds = options.compaction.verdict_thresholds();
    // Opened once: the profile, the plan, the rewrite and the scans all read this state.
    let table = Table::open(&options.table, &options.locate)?;
    // Streamed by the lean reader, as the profile is: a million-file table is not held whole.
    let before = table_profile_for_planning(&table, &thresholds)?;
    let summary_before = summarize(&before);
    crate::progress_lines::line(|| {
        format!("profiled {} partitions, {} degraded", before.len(), summary_before.fragmented_partition_count)
    });

    // Plan (metadata only), then act on exactly the partitions the plan compacts. A table this
    // version does not rewrite (Iceberg columns of a type it cannot write back, a Delta feature a
    // rewrite could break) keeps every partition, with the reason, and the rest of the gate runs
    // as usual.
    let rewritable = match &table {
        Table::Iceberg { table, .. } => table.require_rewritable(),
        Table::Delta(table) => crate::action::compact::delta::check_protocol(table),
    };
    let compact_with = |dry_run: bool, ratio: Option<f64>| {
        compact_with_executor(
            Opened { table: &table, name: &options.table, locate: &options.locate },
            &options.compaction,
            &options.executor,
            dry_run,
            host,
            ratio,
        )
    };
    let planned = match rewritable {
        Ok(()) => compact_with(true, None)?,
        Err(why) => {
            let mut plans = crate::plan::compaction::plan(&table.live_files()?, &options.compaction, 1.0);
            check_selected(&plans, options.compaction.partitions.as_deref())?;
            plans.iter_mut().filter(|p| p.verdict == Verdict::Compact).for_each(|p| p.skip(why.message()));
            Executed {
                report: CompactionReport {
                    plans,
                    snapshot_id: None,
                    metadata_location: None,
                    dry_run: true,
                    output_ratio: None,
                    written: Vec::new(),
                    groups: Vec::new(),
                    layout: crate::plan::layout::Layout::Binpack,
                    warning: None,
                    not_stitched: Default::default(),
                    outcomes: Default::default(),
                },
                routes: Default::default(),
                spark: Default::default(),
            }
        }
    };
    let plan = &planned.report;
    // The projected speedup of the partitions the plan compacts, on the files it leaves.
    let projected = {
        let compacted = plan.plans.iter().filter(|p| p.verdict == Verdict::Compact);
        let (files_before, files_after, bytes) = compacted.fold((0, 0, 0), |(b, a, s), p| {
            let size = before.iter().find(|x| x.key == p.key).map_or(0, |x| x.total_size_bytes);
            (b + p.files_before, a + p.files_after(), s + size)
        });
        projection::speedup(files_before, files_after, bytes)
    };
    let compacting: HashSet<PartitionKey> =
        plan.plans.iter().filter(|p| p.verdict == Verdict::Compact).map(|p| p.key.clone()).collect();
    crate::progress_lines::line(|| {
        format!("planned: {} partitions to compact in {} groups", compacting.len(), plan.groups.len())
    });
    // The measured scans cover a bounded sample of the rewrite groups ([`scan_sample`]) this
    // session rewrites (groups are in plan order; Spark's partitions are not sampled).
    let local_groups: Vec<GroupFiles> =
        plan.groups.iter().filter(|g| planned.routes.get(&g.key).is_none_or(|r| !r.spark)).cloned().collect();
    let sampled: Vec<GroupFiles> =
        scan_sample(&local_groups, SCAN_SAMPLE_BYTES).into_iter().map(|g| local_groups[g].clone()).collect();
    let measure = options.measure_speedup && !options.dry_run && !sampled.is_empty();
    let before_paths: Vec<String> =
        if measure { sampled.iter().flat_map(|g| g.inputs.clone()).collect() } else { Vec::new() };
    let sampled_bytes: u64 = sampled.iter().map(|g| g.input_bytes).sum();
    let planned_bytes: u64 = local_groups.iter().map(|g| g.input_bytes).sum();
    let scan_before = if measure {
        let conn = host.connect()?;
        Some(scan(&conn, &table, &before_paths, SCAN_RUNS)?)
    } else {
        None
    };
    let executed = if options.dry_run || compacting.is_empty() {
        planned
    } else {
        // The plan's measured ratio, so the run compacts what the plan (and the scan) covered.
        compact_with(false, plan.output_ratio)?
    };
    // A Spark rewrite that failed, broke off or overstepped: raised (the caller posts the alert)
    // before any expiry or manifest merge of ours runs.
    if let Some(error) = executed.failure_error() {
        return Err(Error::new(error.kind(), format!("{}; nothing was expired", error.message())));
    }
    let report = &executed.report;
    crate::progress_lines::line(|| match report.snapshot_id {
        Some(id) => format!("compaction committed (last commit {id}); verifying, then the other steps"),
        None => "nothing compacted; the other steps".into(),
    });
    // After a commit the table is read again: the state it committed, and what history to retire.
    let reopened = match executed.committed() {
        true => Some(Table::open(&options.table, &options.locate)?),
        false => None,
    };
    let after_table = reopened.as_ref().unwrap_or(&table);
    let after = match &reopened {
        Some(t) => table_profile(t, &thresholds)?,
        None => before.clone(),
    };
    // The same rows after: the file each sampled group became (none for a group whose every row
    // was deleted). A sampled group the real run did not rewrite and commit as planned (a
    // partition planned again after a conflict, or given up) leaves the speedup unmeasured
    // rather than compared on different rows.
    let after_paths: Option<Vec<String>> = sampled
        .iter()
        .map(|g| {
            let wanted: HashSet<&String> = g.inputs.iter().collect();
            report
                .groups
                .iter()
                .filter(|r| r.snapshot_id.is_some())
                .find(|r| r.inputs.len() == wanted.len() && r.inputs.iter().all(|p| wanted.contains(p)))
                .map(|r| r.outputs.clone())
        })
        .collect::<Option<Vec<Vec<String>>>>()
        .map(|outputs| outputs.into_iter().flatten().collect());
    let (scan_before, scan_after) = match (scan_before, after_paths) {
        (Some(before_scan), Some(after_paths)) if report.snapshot_id.is_some() => {
            let conn = host.connect()?;
            let after_scan = scan(&conn, after_table, &after_paths, SCAN_RUNS)?;
            if (after_scan.rows, &after_scan.checksum) != (before_scan.rows, &before_scan.checksum) {
                return Err(Error::new(
                    ErrorKind::CorruptMetadata,
                    format!(
                        "verification failed: the sampled rewrite groups read {} rows (checksum {}) before and {} \
                         (checksum {}) after; the compaction snapshot is {:?}",
                        before_scan.rows,
                        before_scan.checksum,
                        after_scan.rows,
                        after_scan.checksum,
                        report.snapshot_id
                    ),
                ));
            }
            (Some(before_scan), Some(after_scan))
        }
        _ => (None, None),
    };

    let compaction_snapshot_id = report.snapshot_id.or_else(|| executed.spark_snapshots().last().copied());
    crate::interrupt::check(&match compaction_snapshot_id {
        Some(id) => format!("the compaction committed snapshot {id} (which stands); nothing was expired"),
        None => "nothing was committed".to_string(),
    })?;
    // Position deletes merged (or made vectors) where they are bloated (Iceberg).
    // On a busy table (partial progress, the gate's default) a later step another writer's
    // commits keep conflicting with is left for the next run, like a lost partition.
    let mut lost_steps: Vec<String> = Vec::new();
    let deletes = after_compaction(
        rewrite_deletes(after_table, options, host),
        options,
        ("the position delete rewrite", "snapshot"),
        compaction_snapshot_id,
        &mut lost_steps,
    )?;
    let rewritten = match deletes.as_ref().and_then(|d| d.metadata_location.as_ref()) {
        Some(_) => Some(Table::open(&options.table, &options.locate)?),
        None => None,
    };
    let after_table = rewritten.as_ref().unwrap_or(after_table);
    crate::interrupt::check("the maintenance committed so far stands; nothing was expired")?;
    // Small manifests merged when they are bloated as data files are degraded (Iceberg; Delta's
    // log is compacted by its checkpoints).
    let manifests = after_compaction(
        merge_manifests(after_table, options),
        options,
        ("the manifest rewrite", "snapshot"),
        compaction_snapshot_id,
        &mut lost_steps,
    )?;
    let remerged = match manifests.as_ref().and_then(|m| m.metadata_location.as_ref()) {
        Some(_) => Some(Table::open(&options.table, &options.locate)?),
        None => None,
    };
    let after_table = remerged.as_ref().unwrap_or(after_table);
    crate::interrupt::check("the maintenance committed so far stands; nothing was expired")?;
    let retire_step = match after_table.format() {
        TableFormat::Iceberg => ("snapshot expiry", "snapshot"),
        TableFormat::Delta => ("VACUUM", "version"),
    };
    let retired = after_compaction(
        retire_history(after_table, options, host).map(Some),
        options,
        retire_step,
        compaction_snapshot_id,
        &mut lost_steps,
    )?
    .unwrap_or_else(|| Retired::nothing(after_table, options));
    let summary_after = summarize(&after);
    crate::progress_lines::line(|| {
        format!(
            "retired history: {} snapshots expired, {} files deleted",
            retired.snapshots_expired, retired.files_deleted
        )
    });

    let mut lines = Vec::new();
    for p in &report.plans {
        let b = before.iter().find(|x| x.key == p.key);
        let a = after.iter().find(|x| x.key == p.key);
        let compacted = p.verdict == Verdict::Compact;
        let (files_after, small_after, ratio_after) = match (options.dry_run, compacted, a) {
            // A dry run reports what the plan would leave (outputs assumed not small).
            (true, true, _) => {
                let small = p.small_files_before.saturating_sub(p.small_inputs);
                (p.files_after(), small, small as f64 / p.files_after().max(1) as f64)
            }
            (_, _, Some(a)) => (a.total_files, a.small_files, a.fragmentation_ratio),
            (_, _, None) => (0, 0, 0.0),
        };
        let verdict = match (p.verdict, options.dry_run) {
            (Verdict::Compact, true) => LineVerdict::WouldCompact,
            (Verdict::Compact, false) => LineVerdict::Compacted,
            (Verdict::Healthy, _) => LineVerdict::Healthy,
            (Verdict::Skipped, _) => LineVerdict::Skipped,
        };
        let route = executed.routes.get(&p.key).filter(|_| compacted);
        let spark = executed.spark.get(&p.key);
        let outcome = report.outcomes.get(&p.key);
        let action = match (compacted, spark) {
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
                if options.dry_run { "would rewrite" } else { "rewrote" },
                p.input_files(),
                p.groups.len(),
                if p.groups.len() == 1 { "" } else { "s" },
                if route.is_some_and(|r| r.spark) { " on Spark" } else { "" }
            ),
            (false, _) => "none".into(),
        };
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
            action,
            executor: route.map(|r| if r.spark { "spark" } else { "local" }.to_string()),
            executor_reason: route.map(|r| r.why.clone()),
            strategy: (p.verdict == Verdict::Compact).then(|| report.layout.label()),
            commit: outcome.map(|o| o.describe()),
            sizes_before: b.map_or_else(String::new, |b| b.size_histogram()),
            sizes_after: a.map_or_else(String::new, |a| a.size_histogram()),
        });
    }
    let compacted_lines: Vec<&PartitionLine> = lines.iter().filter(|l| l.bytes_consolidated > 0).collect();
    let manifest_snapshot_id = manifests.as_ref().and_then(|m| m.snapshot_id);
    let delete_rewrite_snapshot_id = deletes.as_ref().and_then(|d| d.snapshot_id);
    let changed = executed.committed()
        || manifest_snapshot_id.is_some()
        || delete_rewrite_snapshot_id.is_some()
        || retired.changed;
    let delete_partitions = deletes.iter().flat_map(|d| &d.partitions).filter(|p| p.rewrites);
    let merged_groups = manifests.iter().flat_map(|m| &m.groups).filter(|g| g.merges());
    let gave_up: Vec<&str> = report
        .plans
        .iter()
        .filter(|p| report.outcomes.get(&p.key).is_some_and(|o| o.gave_up()))
        .map(|p| p.partition.as_str())
        .collect();
    let status = if options.dry_run {
        RunStatus::DryRun
    } else if !gave_up.is_empty() || !lost_steps.is_empty() {
        RunStatus::Incomplete
    } else if changed {
        RunStatus::Maintained
    } else {
        RunStatus::Optimal
    };
    Ok(Scorecard {
        execution_id: execution_id.to_string(),
        table: options.table.clone(),
        format: table.format(),
        status,
        dry_run: options.dry_run,
        started_ms,
        duration_ms: started.elapsed().as_millis() as u64,
        small_file_threshold_mb: thresholds.small_file_threshold_mb,
        fragmentation_ratio_threshold: thresholds.fragmentation_ratio_threshold,
        retention_days: retired.retention_days,
        partitions_degraded: summary_before.fragmented_partition_count,
        partitions_compacted: compacted_lines.len() as u64,
        small_files_eliminated: compacted_lines
            .iter()
            .map(|l| l.small_files_before.saturating_sub(l.small_files_after))
            .sum(),
        bytes_consolidated: compacted_lines.iter().map(|l| l.bytes_consolidated).sum(),
        avg_ratio_before: summary_before.avg_fragmentation_ratio,
        // A dry run projects from its lines (what the plan would leave), like each line does.
        avg_ratio_after: if options.dry_run {
            lines.iter().map(|l| l.ratio_after).sum::<f64>() / lines.len().max(1) as f64
        } else {
            summary_after.avg_fragmentation_ratio
        },
        projected_speedup_low: projected.low,
        projected_speedup_high: projected.high,
        scan_share: if scan_after.is_some() { sampled_bytes as f64 / planned_bytes.max(1) as f64 } else { 0.0 },
        scan_before,
        scan_after,
        compaction_snapshot_id,
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
        partitions: lines,
        warnings: [
            options.format_only.warning(table.format()),
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
            (!lost_steps.is_empty()).then(|| lost_steps.join("; ")),
            deletes.and_then(|d| d.warning),
            manifests.and_then(|m| m.warning),
            retired.warning,
        ]
        .into_iter()
        .flatten()
        .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
