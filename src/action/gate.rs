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

mod outcome;

use outcome::{Compacted, Later, Outcome, Retired, SCAN_RUNS, ScanSample, partition_lines};
pub use outcome::{SCAN_SAMPLE_BYTES, SCAN_SAMPLE_SHARE};

use crate::action::compact::CompactionReport;
use crate::action::executor::{Executed, ExecutorOptions, Opened, compact_with_executor};
use crate::action::expire_snapshots::{ExpiryOptions, ExpiryReport, expire, retention_days_in_force};
use crate::action::rewrite_manifests::{
    ManifestsToMerge, RewriteManifestsOptions, RewriteManifestsReport, rewrite_manifests,
};
use crate::action::rewrite_position_deletes::{
    RewritePositionDeletesOptions, RewritePositionDeletesReport, rewrite_position_deletes,
};
use crate::action::scan::{ScanResult, scan};
use crate::action::vacuum::{VacuumOptions, vacuum};
use crate::duck::HostDb;
use crate::error::{Error, ErrorKind, Result};
use crate::notify::card;
use crate::notify::slack::{Delivery, RetryPolicy, Webhook, post};
use crate::plan::compaction::{CompactionOptions, Verdict};
use crate::plan::format_options::FormatOnly;
use crate::plan::partition_selection::check_selected;
use crate::plan::projection::{self, SpeedupRange};
use crate::profile::{PartitionProfile, summarize, table_profile, table_profile_for_planning};
use crate::report::{RunStatus, Scorecard};
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
/// A Delta table VACUUM refuses is left as it is, with a warning naming why.
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
        Table::Delta(delta) => {
            // A table VACUUM refuses (a reader feature whose files it does not know) keeps its
            // files, as the compaction keeps a table it refuses: the run goes on and says why.
            if let Some(why) = crate::action::vacuum::protocol_refusal(delta) {
                return Ok(Retired {
                    warning: Some(format!("VACUUM was not run: the Delta table {why}")),
                    ..Retired::nothing(table, &options.expiry)
                });
            }
            let table = delta;
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

/// Runs the gate's steps on the table, which is opened once here and reloaded (through the same
/// catalog or location, the name not resolved again) after each step that committed: profile,
/// [`plan`], [`compact_measured`], [`later_steps`], then the [`Outcome`]'s scorecard.
fn gate(options: &GateOptions, host: &HostDb, execution_id: &str, started: Instant) -> Result<Scorecard> {
    options.compaction.validate()?;
    options.expiry.validate()?;
    let started_ms = chrono::Utc::now().timestamp_millis();
    let thresholds = options.compaction.verdict_thresholds();
    // Opened once: the profile, the plan, the rewrite and the scans all read this state.
    let table = Table::open(&options.table, &options.locate)?;
    let format = table.format();
    // Streamed by the lean reader, as the profile is: a million-file table is not held whole.
    let before = table_profile_for_planning(&table, &thresholds)?;
    let summary_before = summarize(&before);
    crate::progress_lines::line(|| {
        format!("profiled {} partitions, {} degraded", before.len(), summary_before.fragmented_partition_count)
    });
    let planned = plan(&table, options, host)?;
    let projected = projected_speedup(&planned.report, &before);
    let sample = ScanSample::of(&planned, options.measure_speedup && !options.dry_run);
    let compacted = compact_measured(table, options, host, planned, &before, &sample)?;
    let report = &compacted.executed.report;
    let compaction_snapshot_id = report.snapshot_id.or_else(|| compacted.executed.spark_snapshots().last().copied());
    crate::interrupt::check(&match compaction_snapshot_id {
        Some(id) => format!("the compaction committed snapshot {id} (which stands); nothing was expired"),
        None => "nothing was committed".to_string(),
    })?;
    let later = later_steps(&compacted.table, options, host, compaction_snapshot_id)?;
    let outcome = Outcome {
        started_ms,
        duration_ms: started.elapsed().as_millis() as u64,
        thresholds,
        format,
        lines: partition_lines(options.dry_run, &compacted.executed, &before, &compacted.after),
        summary_before,
        projected,
        sample,
        compacted,
        compaction_snapshot_id,
        later,
    };
    Ok(outcome.scorecard(execution_id, &options.table, options.dry_run, &options.format_only))
}

/// Plans the compaction (metadata only; the executor routes each partition). A table this
/// version does not rewrite (Iceberg columns of a type it cannot write back, a Delta feature a
/// rewrite could break) keeps every partition, with the reason, and the rest of the gate runs
/// as usual.
fn plan(table: &Table, options: &GateOptions, host: &HostDb) -> Result<Executed> {
    let rewritable = match table {
        Table::Iceberg { table, .. } => table.require_rewritable(),
        Table::Delta(table) => crate::action::compact::delta::check_protocol(table),
    };
    let planned = match rewritable {
        Ok(()) => compact_with_executor(
            Opened { table, name: &options.table, locate: &options.locate },
            &options.compaction,
            &options.executor,
            true,
            host,
            None,
        )?,
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
    crate::progress_lines::line(|| {
        let compacting: HashSet<&PartitionKey> =
            plan.plans.iter().filter(|p| p.verdict == Verdict::Compact).map(|p| &p.key).collect();
        format!("planned: {} partitions to compact in {} groups", compacting.len(), plan.groups.len())
    });
    Ok(planned)
}

/// The projected speedup of the partitions the plan compacts, on the files it leaves.
fn projected_speedup(plan: &CompactionReport, before: &[PartitionProfile]) -> SpeedupRange {
    let compacted = plan.plans.iter().filter(|p| p.verdict == Verdict::Compact);
    let (files_before, files_after, bytes) = compacted.fold((0, 0, 0), |(b, a, s), p| {
        let size = before.iter().find(|x| x.key == p.key).map_or(0, |x| x.total_size_bytes);
        (b + p.files_before, a + p.files_after(), s + size)
    });
    projection::speedup(files_before, files_after, bytes)
}

/// Compacts the partitions `planned` compacts (nothing on a dry run), the sampled groups scanned
/// before and after and compared ([`verify`]). A Spark rewrite that failed, broke off or
/// overstepped is raised (the caller posts the alert) before any expiry or manifest merge of
/// ours runs. After a commit the table is reloaded: the state it committed, and what history to
/// retire.
fn compact_measured(
    table: Table,
    options: &GateOptions,
    host: &HostDb,
    planned: Executed,
    before: &[PartitionProfile],
    sample: &ScanSample,
) -> Result<Compacted> {
    let scan_before = if sample.measure {
        let conn = host.connect()?;
        let paths: Vec<String> = sample.groups.iter().flat_map(|g| g.inputs.clone()).collect();
        Some(scan(&conn, &table, &paths, SCAN_RUNS)?)
    } else {
        None
    };
    let compacting = planned.report.plans.iter().any(|p| p.verdict == Verdict::Compact);
    let executed = if options.dry_run || !compacting {
        planned
    } else {
        // The plan's measured ratio, so the run compacts what the plan (and the scan) covered.
        compact_with_executor(
            Opened { table: &table, name: &options.table, locate: &options.locate },
            &options.compaction,
            &options.executor,
            false,
            host,
            planned.report.output_ratio,
        )?
    };
    if let Some(error) = executed.failure_error() {
        return Err(Error::new(error.kind(), format!("{}; nothing was expired", error.message())));
    }
    crate::progress_lines::line(|| match executed.report.snapshot_id {
        Some(id) => format!("compaction committed (last commit {id}); verifying, then the other steps"),
        None => "nothing compacted; the other steps".into(),
    });
    let (table, after) = match executed.committed() {
        true => {
            let table = table.reload()?;
            let after = table_profile(&table, &options.compaction.verdict_thresholds())?;
            (table, after)
        }
        false => (table, before.to_vec()),
    };
    let (scan_before, scan_after) = verify(&table, host, &executed.report, sample, scan_before)?;
    Ok(Compacted { executed, table, after, scan_before, scan_after })
}

/// The scans after, compared with `scan_before`: the same rows read from the file each sampled
/// group became (none for a group whose every row was deleted). A sampled group the real run did
/// not rewrite and commit as planned (a partition planned again after a conflict, or given up)
/// leaves the speedup unmeasured rather than compared on different rows. Different rows or
/// checksums fail the run.
fn verify(
    table: &Table,
    host: &HostDb,
    report: &CompactionReport,
    sample: &ScanSample,
    scan_before: Option<ScanResult>,
) -> Result<(Option<ScanResult>, Option<ScanResult>)> {
    let after_paths: Option<Vec<String>> = sample
        .groups
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
    let (Some(before_scan), Some(after_paths), Some(snapshot_id)) = (scan_before, after_paths, report.snapshot_id)
    else {
        return Ok((None, None));
    };
    let conn = host.connect()?;
    let after_scan = scan(&conn, table, &after_paths, SCAN_RUNS)?;
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
                Some(snapshot_id)
            ),
        ));
    }
    Ok((Some(before_scan), Some(after_scan)))
}

/// The steps after the compaction (which committed `compaction_snapshot_id`, when it did), each
/// on the table as the one before left it (reloaded after a commit): position deletes merged (or
/// made vectors) where they are bloated (Iceberg); small manifests merged when they are bloated
/// as data files are degraded (Iceberg; Delta's log is compacted by its checkpoints); history
/// retired. On a busy table (partial progress, the gate's default) a step another writer's
/// commits keep conflicting with is left for the next run, like a lost partition.
fn later_steps(
    table: &Table,
    options: &GateOptions,
    host: &HostDb,
    compaction_snapshot_id: Option<i64>,
) -> Result<Later> {
    let mut lost_steps: Vec<String> = Vec::new();
    let deletes = after_compaction(
        rewrite_deletes(table, options, host),
        options,
        ("the position delete rewrite", "snapshot"),
        compaction_snapshot_id,
        &mut lost_steps,
    )?;
    let rewritten = match deletes.as_ref().and_then(|d| d.metadata_location.as_ref()) {
        Some(_) => Some(table.reload()?),
        None => None,
    };
    let table = rewritten.as_ref().unwrap_or(table);
    crate::interrupt::check("the maintenance committed so far stands; nothing was expired")?;
    let manifests = after_compaction(
        merge_manifests(table, options),
        options,
        ("the manifest rewrite", "snapshot"),
        compaction_snapshot_id,
        &mut lost_steps,
    )?;
    let remerged = match manifests.as_ref().and_then(|m| m.metadata_location.as_ref()) {
        Some(_) => Some(table.reload()?),
        None => None,
    };
    let table = remerged.as_ref().unwrap_or(table);
    crate::interrupt::check("the maintenance committed so far stands; nothing was expired")?;
    let retire_step = match table.format() {
        TableFormat::Iceberg => ("snapshot expiry", "snapshot"),
        TableFormat::Delta => ("VACUUM", "version"),
    };
    let retired = after_compaction(
        retire_history(table, options, host).map(Some),
        options,
        retire_step,
        compaction_snapshot_id,
        &mut lost_steps,
    )?
    .unwrap_or_else(|| Retired::nothing(table, &options.expiry));
    crate::progress_lines::line(|| {
        format!(
            "retired history: {} snapshots expired, {} files deleted",
            retired.snapshots_expired, retired.files_deleted
        )
    });
    Ok(Later { deletes, manifests, retired, lost_steps })
}
