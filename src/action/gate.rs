//! The maintenance gate: profile → verdict → compact only the degraded partitions → expire
//! snapshots past retention → re-profile → measured scorecard → Slack.
//!
//! Nothing half-done: compaction and expiry each commit atomically (or not at all); a failure
//! anywhere posts the failure alert (table and execution id) and raises. A failed Slack post
//! never undoes maintenance: it is reported in the scorecard (and raised only when asked).

use std::collections::HashSet;
use std::time::Instant;

use crate::action::compact::{CompactionReport, compact};
use crate::action::expire::{ExpiryOptions, ExpiryReport, expire, retention_days_in_force};
use crate::action::scan::{ScanResult, scan};
use crate::duck::HostDb;
use crate::error::{Error, ErrorKind, Result};
use crate::notify::card;
use crate::notify::slack::{Delivery, RetryPolicy, Webhook, post};
use crate::plan::compaction::{CompactionOptions, Verdict};
use crate::profile::{profile, summarize};
use crate::table::iceberg::IcebergTable;
use crate::table::{self, DataFile, FileContent, LocateOptions, PartitionKey};

/// Everything a gate run takes.
#[derive(Debug, Clone)]
pub struct GateOptions {
    /// The table as the user named it.
    pub table: String,
    /// How to resolve it.
    pub locate: LocateOptions,
    /// Thresholds, target and limits of the compaction.
    pub compaction: CompactionOptions,
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
}

/// One partition's line of the scorecard.
#[derive(Debug, Clone, PartialEq)]
pub struct PartitionLine {
    /// Label.
    pub partition: String,
    /// Spec id.
    pub spec_id: i32,
    /// `compacted`, `would compact`, `healthy`, `skipped`.
    pub verdict: String,
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
    /// What was done, in words.
    pub action: String,
}

/// The whole scorecard of one run.
#[derive(Debug, Clone, PartialEq)]
pub struct Scorecard {
    /// This run's id.
    pub execution_id: String,
    /// The table as named.
    pub table: String,
    /// `maintained`, `optimal`, or `dry run`.
    pub status: String,
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
    /// The reference flow's projected speedup (files / target-sized files in degraded partitions).
    pub projected_speedup: f64,
    /// Scan of the compacted partitions before and after, when measured.
    pub scan_before: Option<ScanResult>,
    /// See `scan_before`.
    pub scan_after: Option<ScanResult>,
    /// The compaction's snapshot.
    pub compaction_snapshot_id: Option<i64>,
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

/// Runs the gate. On failure the alert is posted (when a webhook is set) and the error raised.
pub fn run_gate(options: &GateOptions, host: &HostDb) -> Result<Scorecard> {
    let execution_id = uuid::Uuid::new_v4().to_string();
    let started = Instant::now();
    match gate(options, host, &execution_id, started) {
        Ok(mut scorecard) => {
            deliver(options, &mut scorecard)?;
            Ok(scorecard)
        }
        Err(e) => {
            let mut message = e.to_string();
            if let Some(webhook) = &options.webhook
                && !options.dry_run
            {
                let delivery = post(
                    webhook,
                    &card::failure_payload(&options.table, &execution_id, &message, e.kind().is_retryable()),
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
            Err(Error::new(e.kind(), format!("{message} [execution {execution_id}]")))
        }
    }
}

fn deliver(options: &GateOptions, scorecard: &mut Scorecard) -> Result<()> {
    let optimal = scorecard.status == "optimal";
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

/// The data files of `files` in `partitions`.
fn data_paths_in(files: &[DataFile], partitions: &HashSet<PartitionKey>) -> Vec<String> {
    files
        .iter()
        .filter(|f| f.content == FileContent::Data && partitions.contains(&f.key))
        .map(|f| f.path.clone())
        .collect()
}

/// Scans per measured speedup: one to warm the cache, one timed (the best counts).
const SCAN_RUNS: u32 = 2;

fn gate(options: &GateOptions, host: &HostDb, execution_id: &str, started: Instant) -> Result<Scorecard> {
    options.compaction.validate()?;
    options.expiry.validate()?;
    let started_ms = chrono::Utc::now().timestamp_millis();
    let thresholds = options.compaction.thresholds;
    let located = table::locate(&options.table, &options.locate)?;
    let before_table = IcebergTable::load(&located.metadata_location)?;
    let before_files = before_table.live_files()?;
    let before = profile(&before_files, &thresholds);
    let summary_before = summarize(&before, options.compaction.target_file_size_mb);

    // Plan (metadata only), then act on exactly the partitions the plan compacts. A table this
    // version does not rewrite (format v3) keeps every partition, with the reason, and the rest
    // of the gate (expiry, scorecard) runs as usual.
    let plan = match before_table.require_rewritable() {
        Ok(()) => compact(&options.table, &options.locate, &options.compaction, true, host, None)?,
        Err(why) => {
            let mut plans = crate::plan::compaction::plan(&before_files, &options.compaction, 1.0);
            plans.iter_mut().filter(|p| p.verdict == Verdict::Compact).for_each(|p| p.skip(why.message()));
            CompactionReport {
                plans,
                snapshot_id: None,
                metadata_location: None,
                dry_run: true,
                output_ratio: None,
                written: Vec::new(),
            }
        }
    };
    let compacting: HashSet<PartitionKey> =
        plan.plans.iter().filter(|p| p.verdict == Verdict::Compact).map(|p| p.key.clone()).collect();
    let measure = options.measure_speedup && !options.dry_run && !compacting.is_empty();
    let before_paths = if measure { data_paths_in(&before_files, &compacting) } else { Vec::new() };
    let scan_before = if measure {
        let conn = host.connect()?;
        Some(scan(&conn, &before_table, &before_paths, SCAN_RUNS)?)
    } else {
        None
    };
    let report = if options.dry_run || compacting.is_empty() {
        plan
    } else {
        // The plan's measured ratio, so the run compacts what the plan (and the scan) covered.
        compact(&options.table, &options.locate, &options.compaction, false, host, plan.output_ratio)?
    };
    let (after_table, after_files) = match &report.metadata_location {
        Some(location) => {
            let table = IcebergTable::load(location)?;
            let files = table.live_files()?;
            (table, files)
        }
        None => (before_table.clone(), before_files.clone()),
    };
    let scan_after = match &scan_before {
        Some(before_scan) => {
            // The same rows after: the files scanned before that are still live, and the files
            // the compaction wrote (not files a concurrent writer added meanwhile).
            let kept: HashSet<&String> = before_paths.iter().chain(&report.written).collect();
            let after_paths: Vec<String> =
                data_paths_in(&after_files, &compacting).into_iter().filter(|p| kept.contains(p)).collect();
            let conn = host.connect()?;
            let after_scan = scan(&conn, &after_table, &after_paths, SCAN_RUNS)?;
            if (after_scan.rows, &after_scan.checksum) != (before_scan.rows, &before_scan.checksum) {
                return Err(Error::new(
                    ErrorKind::CorruptMetadata,
                    format!(
                        "verification failed: the compacted partitions read {} rows (checksum {}) before and {} \
                         (checksum {}) after; the compaction snapshot is {:?}",
                        before_scan.rows,
                        before_scan.checksum,
                        after_scan.rows,
                        after_scan.checksum,
                        report.snapshot_id
                    ),
                ));
            }
            Some(after_scan)
        }
        None => None,
    };

    crate::interrupt::check(&match report.snapshot_id {
        Some(id) => format!("the compaction committed snapshot {id} (which stands); nothing was expired"),
        None => "nothing was committed".to_string(),
    })?;
    let expiry_options = ExpiryOptions { dry_run: options.dry_run, ..options.expiry.clone() };
    let expiry: ExpiryReport =
        expire(&options.table, &options.locate, &expiry_options).map_err(|e| match report.snapshot_id {
            Some(id) => Error::new(
                e.kind(),
                format!("snapshot expiry failed after the compaction committed snapshot {id} (which stands): {e}"),
            ),
            None => e,
        })?;
    let after = profile(&after_files, &thresholds);
    let summary_after = summarize(&after, options.compaction.target_file_size_mb);

    let mut lines = Vec::new();
    for p in &report.plans {
        let b = before.iter().find(|x| x.key == p.key);
        let a = after.iter().find(|x| x.key == p.key);
        let compacted = p.verdict == Verdict::Compact;
        let (files_after, small_after, ratio_after) = match (options.dry_run, compacted, a) {
            // A dry run reports what the plan would leave (outputs assumed not small).
            (true, true, _) => {
                let small = p.small_files_before - p.input_files();
                (p.files_after(), small, small as f64 / p.files_after().max(1) as f64)
            }
            (_, _, Some(a)) => (a.total_files, a.small_files, a.fragmentation_ratio),
            (_, _, None) => (0, 0, 0.0),
        };
        let verdict = match (p.verdict, options.dry_run) {
            (Verdict::Compact, true) => "would compact",
            (Verdict::Compact, false) => "compacted",
            (other, _) => other.as_str(),
        };
        let action = if compacted {
            format!(
                "{} {} small files into {} file{}",
                if options.dry_run { "would rewrite" } else { "rewrote" },
                p.input_files(),
                p.groups.len(),
                if p.groups.len() == 1 { "" } else { "s" }
            )
        } else {
            "none".into()
        };
        lines.push(PartitionLine {
            partition: p.partition.clone(),
            spec_id: p.spec_id,
            verdict: verdict.into(),
            reason: p.reason.clone(),
            files_before: p.files_before,
            files_after,
            small_files_before: p.small_files_before,
            small_files_after: small_after,
            ratio_before: b.map_or(0.0, |b| b.fragmentation_ratio),
            ratio_after,
            bytes_consolidated: p.bytes_to_rewrite,
            action,
        });
    }
    let compacted_lines: Vec<&PartitionLine> = lines.iter().filter(|l| l.bytes_consolidated > 0).collect();
    let changed = report.snapshot_id.is_some() || expiry.metadata_location.is_some();
    let status = if options.dry_run {
        "dry run"
    } else if changed {
        "maintained"
    } else {
        "optimal"
    };
    Ok(Scorecard {
        execution_id: execution_id.to_string(),
        table: options.table.clone(),
        status: status.into(),
        dry_run: options.dry_run,
        started_ms,
        duration_ms: started.elapsed().as_millis() as u64,
        small_file_threshold_mb: thresholds.small_file_threshold_mb,
        fragmentation_ratio_threshold: thresholds.fragmentation_ratio_threshold,
        retention_days: retention_days_in_force(&before_table.metadata, &options.expiry),
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
        projected_speedup: summary_before.projected_speedup_factor,
        scan_before,
        scan_after,
        compaction_snapshot_id: report.snapshot_id,
        snapshots_expired: expiry.expired.len() as u64,
        files_deleted: expiry.files.iter().filter(|f| f.removed()).count() as u64,
        bytes_reclaimed: expiry.reclaimed_bytes(),
        notification: String::new(),
        partitions: lines,
    })
}
