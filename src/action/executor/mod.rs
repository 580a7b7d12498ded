//! Who rewrites a degraded partition: this DuckDB session (`local`), a Spark cluster over Spark
//! Connect (`spark`), or, per partition, whichever fits its size (`auto`).
//!
//! The gate keeps everything but the rewrite: profile, plan, verdicts, the scorecard, alerts and
//! snapshot expiry stay here. Delta tables go to Spark as Delta's own `OPTIMIZE … WHERE`
//! ([`crate::action::executor::delta`]); on Iceberg the partitions sent to Spark become one
//! `CALL <catalog>.system.rewrite_data_files(table => …, where => (<a partition's predicate>) OR
//! (…) …, options => map(…))` ([`crate::spark::predicate`]; up to [`PARTITIONS_PER_CALL`] per
//! call), run through the catalog both sides share, so Spark plans and commits them together as
//! it would the whole table. After the call the table is read again and every `replace` snapshot
//! Spark committed is checked: it must add and remove files of the partitions sent only.
//!
//! Safety:
//! - A partition goes to Spark only when its predicate can select it alone: an Iceberg table must be
//!   named through its catalog (Spark finds it by the same name), and no other partition spec
//!   may have live data files (Iceberg's scan filter cannot tell specs apart: a range on `ts`
//!   also picks older-spec files whose `ts` bounds overlap it, and Spark would rewrite them).
//! - Spark unreachable, a failed `CALL`, a call that broke off (its outcome unknown), or a commit
//!   that touched other partitions: reported per partition, and the caller raises (the gate
//!   after posting its failure alert) without running its own expiry or manifest merge, so
//!   nothing of ours deletes files while Spark's outcome is unsettled.
//! - The local part runs first and commits on its own; Spark's commits are Spark's, each
//!   atomic (`partial-progress.enabled = false`).

use std::collections::{HashMap, HashSet};

use iceberg::spec::{ManifestStatus, Operation, Struct};

use crate::action::compact::{CompactionReport, compact};
pub use crate::action::spark_rewrite::Route;
use crate::action::spark_rewrite::{Commit, SparkRewrite, Touched};
use crate::duck::HostDb;
use crate::error::{Error, ErrorKind, Result};
use crate::plan::compaction::{CompactionOptions, PartitionPlan, Verdict};
use crate::plan::layout::Layout;
use crate::profile::MIB;
use crate::spark::predicate::{multipart, partition_predicate, string_literal};
use crate::spark::{Failure, Remote, Session};
use crate::table::iceberg::IcebergTable;
use crate::table::iceberg::partition;
use crate::table::{LocateOptions, PartitionKey, Table};
use delta::DeltaOnSpark;

pub mod delta;

/// `executor := …`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExecutorKind {
    /// Every partition here.
    Local,
    /// Every partition on Spark.
    Spark,
    /// Partitions whose planned rewrite exceeds `local_max_partition_mb` on Spark, the rest here.
    Auto,
}

impl ExecutorKind {
    /// Parses `local`, `spark`, `auto`.
    pub fn parse(text: &str) -> Result<Self> {
        match text.trim().to_ascii_lowercase().as_str() {
            "local" => Ok(Self::Local),
            "spark" => Ok(Self::Spark),
            "auto" => Ok(Self::Auto),
            other => Err(Error::invalid(format!("executor must be 'local', 'spark' or 'auto', got '{other}'"))),
        }
    }
}

/// Where Spark is and what it calls the catalog.
#[derive(Debug, Clone, PartialEq)]
pub struct SparkTarget {
    /// The Spark Connect server.
    pub remote: Remote,
    /// Spark's name of the catalog the table is in (`None`: the name we know it by).
    pub catalog: Option<String>,
}

/// The executor options of `lakehouse_compact` and `lakehouse_gate`.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecutorOptions {
    /// Who rewrites.
    pub kind: ExecutorKind,
    /// Spark, for `spark` and `auto`.
    pub spark: Option<SparkTarget>,
    /// `auto` sends a partition to Spark when its planned rewrite is larger than this, MiB.
    pub local_max_partition_mb: f64,
}

/// `local_max_partition_mb`'s default: 10 GiB, what one node rewrites in a couple of minutes
/// (bench/results/compact_memory.md: 10 GiB in ~100 s on 2 cores, under 1 GB of memory).
pub const DEFAULT_LOCAL_MAX_PARTITION_MB: f64 = 10240.0;

impl Default for ExecutorOptions {
    fn default() -> Self {
        Self { kind: ExecutorKind::Local, spark: None, local_max_partition_mb: DEFAULT_LOCAL_MAX_PARTITION_MB }
    }
}

/// What Spark did for one partition.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SparkOutcome {
    /// Spark's snapshot (none: nothing committed).
    pub snapshot_id: Option<i64>,
    /// Data files Spark's snapshot removed and added, and the bytes it removed.
    pub files_rewritten: u64,
    /// See `files_rewritten`.
    pub files_added: u64,
    /// See `files_rewritten`.
    pub bytes_rewritten: u64,
    /// The Spark Connect operation id.
    pub operation_id: String,
    /// Why it failed (unreachable, failed call, unknown outcome, other partitions touched).
    pub failure: Option<String>,
}

/// A compaction by one or both executors.
#[derive(Debug)]
pub struct Executed {
    /// The plan (the local rewrite's report, Spark's partitions restored to their plan).
    pub report: CompactionReport,
    /// The executor of each planned partition.
    pub routes: HashMap<PartitionKey, Route>,
    /// What Spark did, per partition sent.
    pub spark: HashMap<PartitionKey, SparkOutcome>,
}

impl Executed {
    /// The snapshots Spark committed, by id.
    pub fn spark_snapshots(&self) -> Vec<i64> {
        let mut ids: Vec<i64> = self.spark.values().filter_map(|o| o.snapshot_id).collect();
        ids.sort_unstable();
        // One call commits once for all its partitions: each id once.
        ids.dedup();
        ids
    }

    /// Partitions whose Spark rewrite failed, as `label: why`.
    pub fn failures(&self) -> Vec<String> {
        self.report
            .plans
            .iter()
            .filter_map(|p| {
                self.spark.get(&p.key).and_then(|o| o.failure.as_ref()).map(|f| format!("{}: {f}", p.partition))
            })
            .collect()
    }

    /// Whether anything was committed (here or by Spark).
    pub fn committed(&self) -> bool {
        self.report.snapshot_id.is_some() || self.spark.values().any(|o| o.snapshot_id.is_some())
    }

    /// The error a failed Spark rewrite raises, naming what stands. `None` when nothing failed.
    pub fn failure_error(&self) -> Option<Error> {
        let failures = self.failures();
        if failures.is_empty() {
            return None;
        }
        let mut stands = Vec::new();
        if let Some(id) = self.report.snapshot_id {
            stands.push(format!("the local rewrite committed snapshot {id}"));
        }
        let spark = self.spark_snapshots();
        if !spark.is_empty() {
            stands.push(format!(
                "Spark committed snapshot{} {}",
                if spark.len() == 1 { "" } else { "s" },
                spark.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")
            ));
        }
        Some(Error::new(
            ErrorKind::Io,
            format!(
                "the Spark executor failed for {} of {} partition{} sent to it: {}; {}",
                failures.len(),
                self.spark.len(),
                if self.spark.len() == 1 { "" } else { "s" },
                failures.join("; "),
                if stands.is_empty() {
                    "nothing was committed".to_string()
                } else {
                    format!("{} (which stand{})", stands.join(" and "), if stands.len() == 1 { "s" } else { "" })
                }
            ),
        ))
    }
}

/// A table as opened, and how to open it again (after each commit, to see what Spark did).
#[derive(Clone, Copy)]
pub struct Opened<'a> {
    /// The table.
    pub table: &'a Table,
    /// Its name as the user gave it.
    pub name: &'a str,
    /// How it was resolved.
    pub locate: &'a LocateOptions,
}

/// Compacts `table` with `executor`: plans, routes each planned partition, rewrites the local
/// ones (one commit), then sends the Spark ones in one `CALL` (per [`PARTITIONS_PER_CALL`]). A
/// dry run routes and explains but runs nothing. Spark failures are in the result
/// ([`Executed::failure_error`]), not raised.
pub fn compact_with_executor(
    opened: Opened<'_>,
    options: &CompactionOptions,
    executor: &ExecutorOptions,
    dry_run: bool,
    host: &HostDb,
    known_ratio: Option<f64>,
) -> Result<Executed> {
    let Opened { table, name, locate } = opened;
    if executor.kind == ExecutorKind::Local {
        let report = compact(table, options, dry_run, host, known_ratio)?;
        let routes = local_routes(&report.plans, "executor := 'local'");
        return Ok(Executed { report, routes, spark: HashMap::new() });
    }
    let spark = executor.spark.as_ref().ok_or_else(|| {
        Error::invalid(
            "executor := 'spark' or 'auto' needs spark_remote (or SPARK_REMOTE), e.g. 'sc://localhost:15002'",
        )
    })?;
    // The table as Spark will name it (an Iceberg table's name checked before anything is planned).
    let on_spark = on_spark(table, spark)?;
    let planned = compact(table, options, true, host, known_ratio)?;
    let wanted = wanted(&planned.plans, executor);
    let target: Box<dyn SparkRewrite> = match on_spark {
        OnSpark::Iceberg(iceberg, catalog, spark_table) => {
            let (tuples, live_specs) = partition_tuples(iceberg, &wanted)?;
            Box::new(IcebergOnSpark {
                tuples,
                live_specs,
                metadata: iceberg.metadata.clone(),
                catalog,
                table: spark_table,
                layout: spark_layout(&planned.layout),
                options: spark_options(options),
                name,
                locate,
            })
        }
        OnSpark::Delta(delta) => Box::new(DeltaOnSpark::new(delta, options, &planned.layout)),
    };
    let routes = route(&planned.plans, executor, &wanted, |p| target.predicate(p))?;
    let spark_keys: Vec<PartitionKey> = routes.iter().filter(|(_, (r, _))| r.spark).map(|(k, _)| k.clone()).collect();
    let mut routed: HashMap<PartitionKey, Route> = routes.iter().map(|(k, (r, _))| (k.clone(), r.clone())).collect();
    if dry_run || spark_keys.is_empty() {
        let report = if dry_run || planned.plans.iter().all(|p| p.verdict != Verdict::Compact) {
            planned
        } else {
            compact(table, options, false, host, planned.output_ratio)?
        };
        return Ok(Executed { report, routes: routed, spark: HashMap::new() });
    }
    let report = compact_local_first(table, options, host, &planned, &spark_keys)?;
    let sent: Vec<&PartitionPlan> = planned.plans.iter().filter(|p| spark_keys.contains(&p.key)).collect();
    let outcomes = send_to_spark(target.as_ref(), &spark.remote, &sent, &routes)?;
    explain_outcomes(&mut routed, &outcomes);
    Ok(Executed { report, routes: routed, spark: outcomes })
}

/// The table as Spark will name it: an Iceberg table by its catalog entry (refused when it was
/// named by path), a Delta table by its location.
fn on_spark<'a>(table: &'a Table, spark: &SparkTarget) -> Result<OnSpark<'a>> {
    Ok(match table {
        Table::Iceberg { located, table: iceberg } => {
            let entry = located.catalog_table.as_ref().ok_or_else(|| {
                Error::invalid(
                    "executor := 'spark' or 'auto' needs the table named through its catalog (namespace.table or \
                     catalog.namespace.table), so that Spark rewrites the same table; this one was named by path",
                )
            })?;
            let mut namespace: Vec<&str> = entry.namespace.split('.').collect();
            namespace.push(&entry.table);
            let catalog = spark.catalog.clone().unwrap_or_else(|| entry.catalog.clone());
            OnSpark::Iceberg(iceberg, catalog, multipart(&namespace))
        }
        Table::Delta(delta) => OnSpark::Delta(delta),
    })
}

/// The local partitions of `planned` rewritten first, in one commit of ours (none when every
/// partition it compacts goes to Spark, `spark_keys`); the Spark partitions keep the plan they
/// are sent with.
fn compact_local_first(
    table: &Table,
    options: &CompactionOptions,
    host: &HostDb,
    planned: &CompactionReport,
    spark_keys: &[PartitionKey],
) -> Result<CompactionReport> {
    let local_options = CompactionOptions { excluded: spark_keys.to_vec(), ..options.clone() };
    let any_local = planned.plans.iter().any(|p| p.verdict == Verdict::Compact && !spark_keys.contains(&p.key));
    let mut report = if any_local {
        compact(table, &local_options, false, host, planned.output_ratio)?
    } else {
        CompactionReport { dry_run: false, ..planned.clone() }
    };
    for p in &mut report.plans {
        if let Some(sent) = planned.plans.iter().find(|s| s.key == p.key && spark_keys.contains(&s.key)) {
            *p = sent.clone();
        }
    }
    if !any_local {
        report.groups.clear();
    }
    Ok(report)
}

/// Sends `sent` to Spark, [`PARTITIONS_PER_CALL`] partitions per call (each partition's predicate
/// from `routes`), and reads back from the table what each call committed, per partition. After
/// a call that could not reach Spark or whose outcome is unknown, and after Ctrl-C, the rest are
/// not sent (their outcome says why).
fn send_to_spark(
    target: &dyn SparkRewrite,
    remote: &Remote,
    sent: &[&PartitionPlan],
    routes: &HashMap<PartitionKey, (Route, String)>,
) -> Result<HashMap<PartitionKey, SparkOutcome>> {
    let mut session = Session::new(remote);
    let mut outcomes: HashMap<PartitionKey, SparkOutcome> = HashMap::new();
    let mut stop: Option<String> = None;
    for batch in sent.chunks(PARTITIONS_PER_CALL) {
        let operation_id = uuid::Uuid::new_v4().to_string();
        if stop.is_none() && crate::interrupt::check("").is_err() {
            stop = Some("interrupted".into());
        }
        if let Some(why) = &stop {
            for p in batch {
                let failure = Some(format!("not sent: {why}"));
                outcomes.insert(
                    p.key.clone(),
                    SparkOutcome { failure, operation_id: operation_id.clone(), ..Default::default() },
                );
            }
            continue;
        }
        #[allow(unused_mut)]
        let mut predicate = either(batch.iter().map(|p| routes[&p.key].1.as_str()));
        // Test builds: a predicate of the test's choosing, to make Spark overstep on purpose.
        #[cfg(feature = "test-hooks")]
        if let Ok(forced) = std::env::var("LAKEHOUSE_TEST_SPARK_WHERE") {
            predicate = forced;
        }
        let (failure, commits) = call(&mut session, target, &predicate, &operation_id, &mut stop)?;
        let keys: HashSet<&PartitionKey> = batch.iter().map(|p| &p.key).collect();
        let failure = failure.or_else(|| commits.iter().find_map(|commit| overstepped(commit, &keys)));
        for p in batch {
            let mut outcome =
                SparkOutcome { operation_id: operation_id.clone(), failure: failure.clone(), ..Default::default() };
            for commit in &commits {
                if let Some(touched) = commit.touched.get(&p.key) {
                    outcome.snapshot_id = Some(commit.snapshot_id);
                    outcome.files_rewritten += touched.removed;
                    outcome.files_added += touched.added;
                    outcome.bytes_rewritten += touched.removed_bytes;
                }
            }
            outcomes.insert(p.key.clone(), outcome);
        }
    }
    Ok(outcomes)
}

/// One call of `predicate`'s partitions: its failure, and what Spark committed, read from the
/// table whatever Spark answered (nothing when Spark could not be reached). A call that could
/// not reach Spark, or whose outcome is unknown, sets `stop`: why the rest are not sent.
fn call(
    session: &mut Session,
    target: &dyn SparkRewrite,
    predicate: &str,
    operation_id: &str,
    stop: &mut Option<String>,
) -> Result<(Option<String>, Vec<Commit>)> {
    let before = target.head()?;
    let mut result = Ok(Vec::new());
    for statement in target.statements(predicate) {
        result = session.sql(&statement, operation_id);
        if result.is_err() {
            break;
        }
    }
    let failure = match &result {
        Ok(_) => None,
        Err(Failure::Unreachable(m)) => {
            *stop = Some(m.clone());
            Some(m.clone())
        }
        Err(Failure::Failed(m)) => Some(format!("{m} (operation {operation_id})")),
        Err(Failure::Unknown(m)) => {
            *stop = Some(format!("an earlier call's outcome is unknown ({m})"));
            Some(format!("{m} (operation {operation_id})"))
        }
    };
    let commits = if matches!(result, Err(Failure::Unreachable(_))) { Vec::new() } else { target.commits(before)? };
    Ok((failure, commits))
}

/// The failure of a Spark commit that also rewrote partitions outside the call's, `keys`.
fn overstepped(commit: &Commit, keys: &HashSet<&PartitionKey>) -> Option<String> {
    let others: Vec<&String> =
        commit.touched.iter().filter(|(k, _)| !keys.contains(k)).map(|(_, t)| &t.label).collect();
    (!others.is_empty()).then(|| {
        format!(
            "Spark's snapshot {} also rewrote {} other partition{} ({}), which the gate did not plan",
            commit.snapshot_id,
            others.len(),
            if others.len() == 1 { "" } else { "s" },
            others.iter().take(5).map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
        )
    })
}

/// Each Spark partition's route says what Spark did (or why it failed), with the operation id.
fn explain_outcomes(routed: &mut HashMap<PartitionKey, Route>, outcomes: &HashMap<PartitionKey, SparkOutcome>) {
    for (key, outcome) in outcomes {
        if let Some(route) = routed.get_mut(key) {
            let done = match (&outcome.failure, outcome.snapshot_id) {
                (Some(failure), _) => format!("failed: {failure}"),
                (None, Some(id)) => format!(
                    "Spark rewrote {} files ({:.1} MiB) into {} in snapshot {id}",
                    outcome.files_rewritten,
                    outcome.bytes_rewritten as f64 / MIB,
                    outcome.files_added
                ),
                (None, None) => "Spark found nothing to rewrite and committed nothing".into(),
            };
            route.why = format!("{}; {done} (operation {})", route.why, outcome.operation_id);
        }
    }
}

/// Every planned partition on the local executor.
fn local_routes(plans: &[PartitionPlan], why: &str) -> HashMap<PartitionKey, Route> {
    plans
        .iter()
        .filter(|p| p.verdict == Verdict::Compact)
        .map(|p| (p.key.clone(), Route { spark: false, why: why.to_string() }))
        .collect()
}

/// The planned partitions Spark should get: every one under `spark`, those whose rewrite is
/// larger than `local_max_partition_mb` under `auto`.
fn wanted<'p>(plans: &'p [PartitionPlan], executor: &ExecutorOptions) -> HashSet<&'p PartitionKey> {
    let limit_bytes = (executor.local_max_partition_mb * MIB) as u64;
    plans
        .iter()
        .filter(|p| {
            p.verdict == Verdict::Compact && (executor.kind == ExecutorKind::Spark || p.bytes_to_rewrite > limit_bytes)
        })
        .map(|p| &p.key)
        .collect()
}

/// Routes each planned partition and, for Spark's, writes its predicate (`predicate`). A
/// partition Spark cannot select alone stays local under `auto` and is refused under `spark`.
fn route(
    plans: &[PartitionPlan],
    executor: &ExecutorOptions,
    wanted: &HashSet<&PartitionKey>,
    predicate: impl Fn(&PartitionPlan) -> std::result::Result<String, String>,
) -> Result<HashMap<PartitionKey, (Route, String)>> {
    let mut routes = HashMap::new();
    for p in plans.iter().filter(|p| p.verdict == Verdict::Compact) {
        let size = format!("{:.1} MiB", p.bytes_to_rewrite as f64 / MIB);
        let why_spark = match executor.kind {
            ExecutorKind::Spark => format!("executor := 'spark' ({size} to rewrite)"),
            _ => format!("{size} to rewrite > local_max_partition_mb {}", executor.local_max_partition_mb),
        };
        if !wanted.contains(&p.key) {
            let why = format!("{size} to rewrite <= local_max_partition_mb {}", executor.local_max_partition_mb);
            routes.insert(p.key.clone(), (Route { spark: false, why }, String::new()));
            continue;
        }
        let route = match predicate(p) {
            Ok(predicate) => {
                let selects =
                    if predicate.is_empty() { "the whole table".to_string() } else { format!("where {predicate}") };
                (Route { spark: true, why: format!("spark: {why_spark}; {selects}") }, predicate)
            }
            Err(why) if executor.kind == ExecutorKind::Auto => (
                Route { spark: false, why: format!("local: Spark cannot select this partition alone ({why})") },
                String::new(),
            ),
            Err(why) => {
                return Err(Error::new(
                    ErrorKind::Unsupported,
                    format!(
                        "partition {} cannot be sent to Spark: {why}; use executor := 'auto' or 'local'",
                        p.partition
                    ),
                ));
            }
        };
        routes.insert(p.key.clone(), route);
    }
    Ok(routes)
}

/// A table before its plan: an Iceberg table with Spark's names of its catalog and of itself,
/// or a Delta table.
enum OnSpark<'t> {
    Iceberg(&'t IcebergTable, String, String),
    Delta(&'t crate::table::delta::DeltaLakeTable),
}

/// An Iceberg table as Spark rewrites it: `CALL <catalog>.system.rewrite_data_files(…)` through
/// the catalog both sides share.
struct IcebergOnSpark<'a> {
    /// The partition tuple of each wanted partition.
    tuples: HashMap<PartitionKey, Struct>,
    /// Partition specs with live data files.
    live_specs: HashSet<i32>,
    metadata: iceberg::spec::TableMetadataRef,
    catalog: String,
    table: String,
    layout: String,
    options: String,
    name: &'a str,
    locate: &'a LocateOptions,
}

/// The partition tuple of each `wanted` partition of `iceberg`, and the specs with live data files
/// (read only when some partition is wanted).
fn partition_tuples(
    iceberg: &IcebergTable,
    wanted: &HashSet<&PartitionKey>,
) -> Result<(HashMap<PartitionKey, Struct>, HashSet<i32>)> {
    let mut tuples: HashMap<PartitionKey, Struct> = HashMap::new();
    let mut live_specs: HashSet<i32> = HashSet::new();
    if wanted.is_empty() {
        return Ok((tuples, live_specs));
    }
    for loaded in iceberg.load_manifests()? {
        let spec_id = loaded.file.partition_spec_id;
        for entry in loaded.manifest.entries().iter().filter(|e| e.is_alive()) {
            let file = entry.data_file();
            if file.content_type() == iceberg::spec::DataContentType::Data {
                live_specs.insert(spec_id);
            }
            let key = PartitionKey { spec_id, values: partition::canonical(file.partition()) };
            if wanted.contains(&key) && !tuples.contains_key(&key) {
                tuples.insert(key, file.partition().clone());
            }
        }
    }
    Ok((tuples, live_specs))
}

impl SparkRewrite for IcebergOnSpark<'_> {
    fn predicate(&self, p: &PartitionPlan) -> std::result::Result<String, String> {
        if self.live_specs.len() > 1 {
            return Err(format!(
                "the table has live data files in {} partition specs, and Spark's where cannot keep its rewrite to \
                 one spec",
                self.live_specs.len()
            ));
        }
        match (self.metadata.partition_spec_by_id(p.spec_id), self.tuples.get(&p.key)) {
            (Some(spec), Some(data)) => partition_predicate(spec, self.metadata.current_schema(), data, &self.catalog),
            _ => Err("its partition tuple was not found in the current snapshot".into()),
        }
    }

    fn statements(&self, predicate: &str) -> Vec<String> {
        vec![format!(
            "CALL {}.system.rewrite_data_files(table => {}, where => {}{}, options => map({}))",
            crate::spark::predicate::identifier(&self.catalog),
            string_literal(&self.table),
            string_literal(predicate),
            self.layout,
            self.options
        )]
    }

    fn head(&self) -> Result<Option<i64>> {
        current_snapshot(self.name, self.locate)
    }

    fn commits(&self, before: Option<i64>) -> Result<Vec<Commit>> {
        spark_commits(self.name, self.locate, before)
    }
}

/// `rewrite_data_files` options that make Spark's bin-pack match our plan: our target, our
/// small-file threshold as its lower bound (only small files are rewritten), our
/// `min_input_files`, one atomic commit, and the starting sequence number (so concurrent
/// equality deletes still apply to the rewritten rows).
fn spark_options(options: &CompactionOptions) -> String {
    let target = (options.target_file_size_mb * MIB) as u64;
    let small = options.thresholds.small_file_threshold_bytes() as u64;
    [
        ("target-file-size-bytes", target.to_string()),
        ("min-file-size-bytes", small.to_string()),
        ("min-input-files", options.min_input_files.to_string()),
        ("partial-progress.enabled", "false".into()),
        ("use-starting-sequence-number", "true".into()),
    ]
    .iter()
    .map(|(k, v)| format!("{}, {}", string_literal(k), string_literal(v)))
    .collect::<Vec<_>>()
    .join(", ")
}

/// The `strategy` and `sort_order` arguments that make Spark write our layout: nothing for
/// binpack (Spark's default), `strategy => 'sort'` alone for the table's own sort order (Spark's
/// sort default), and the sort order or `zorder(…)` in Spark's spelling otherwise.
fn spark_layout(layout: &Layout) -> String {
    let column = |c: &str| format!("`{}`", c.replace('`', "``"));
    let order = match layout {
        Layout::Binpack => return String::new(),
        Layout::Sort { table_order: true, .. } => return ", strategy => 'sort'".into(),
        Layout::Sort { terms, .. } => {
            terms.iter().map(|t| format!("{} {}", column(&t.column), t.modifiers())).collect::<Vec<_>>().join(", ")
        }
        Layout::Zorder(columns) => {
            format!("zorder({})", columns.iter().map(|c| column(c)).collect::<Vec<_>>().join(", "))
        }
    };
    format!(", strategy => 'sort', sort_order => {}", string_literal(&order))
}

/// The current snapshot id of the table as its catalog has it now.
fn current_snapshot(name: &str, locate: &LocateOptions) -> Result<Option<i64>> {
    let located = crate::table::locate(name, locate)?;
    let table = IcebergTable::load(&located.metadata_location)?;
    Ok(table.metadata.current_snapshot().map(|s| s.snapshot_id()))
}

/// Partitions sent to Spark in one `CALL` (their predicates OR-ed: Spark parses an OR chain
/// recursively, so a call's predicate is kept to a size its parser takes).
pub const PARTITIONS_PER_CALL: usize = 200;

/// The predicates, each parenthesized, OR-ed.
fn either<'a>(predicates: impl Iterator<Item = &'a str>) -> String {
    predicates.map(|p| format!("({p})")).collect::<Vec<_>>().join(" OR ")
}

/// The `replace` snapshots on `main` after `before`, oldest first, with what they touched.
fn spark_commits(name: &str, locate: &LocateOptions, before: Option<i64>) -> Result<Vec<Commit>> {
    let located = crate::table::locate(name, locate)?;
    let table = IcebergTable::load(&located.metadata_location)?;
    let metadata = table.metadata.clone();
    let mut chain = Vec::new();
    let mut cursor = metadata.current_snapshot().cloned();
    while let Some(snapshot) = cursor {
        if Some(snapshot.snapshot_id()) == before {
            break;
        }
        cursor = snapshot.parent_snapshot_id().and_then(|id| metadata.snapshot_by_id(id).cloned());
        chain.push(snapshot);
    }
    chain.reverse();
    let schema = metadata.current_schema();
    let mut commits = Vec::new();
    for snapshot in chain.into_iter().filter(|s| s.summary().operation == Operation::Replace) {
        let id = snapshot.snapshot_id();
        let mut commit = Commit { snapshot_id: id, touched: HashMap::new() };
        let manifests = crate::runtime::block_on(table.manifest_list(snapshot.manifest_list()))??;
        for file in manifests.into_iter().filter(|m| m.added_snapshot_id == id) {
            let spec_id = file.partition_spec_id;
            let manifest =
                crate::runtime::block_on(crate::table::iceberg::manifest::read(&table.file_io, &metadata, &file))??;
            let spec = metadata.partition_spec_by_id(spec_id).cloned();
            for entry in manifest.entries() {
                if entry.snapshot_id() != Some(id) || entry.status() == ManifestStatus::Existing {
                    continue;
                }
                let data = entry.data_file();
                let key = PartitionKey { spec_id, values: partition::canonical(data.partition()) };
                let touched = commit.touched.entry(key).or_insert_with(|| Touched {
                    label: match &spec {
                        Some(spec) => {
                            let types: Option<Vec<iceberg::spec::Type>> = spec
                                .partition_type(schema)
                                .ok()
                                .map(|t| t.fields().iter().map(|f| f.field_type.as_ref().clone()).collect());
                            partition::label(spec, types.as_deref(), data.partition())
                        }
                        None => format!("spec {spec_id} {}", partition::canonical(data.partition())),
                    },
                    added: 0,
                    removed: 0,
                    removed_bytes: 0,
                });
                if data.content_type() == iceberg::spec::DataContentType::Data {
                    match entry.status() {
                        ManifestStatus::Added => touched.added += 1,
                        _ => {
                            touched.removed += 1;
                            touched.removed_bytes += data.file_size_in_bytes();
                        }
                    }
                }
            }
        }
        commits.push(commit);
    }
    Ok(commits)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::layout::OrderTerm;

    #[test]
    fn executors_parse_and_options_follow_the_plan() {
        assert_eq!(ExecutorKind::parse(" Spark ").unwrap(), ExecutorKind::Spark);
        assert_eq!(ExecutorKind::parse("auto").unwrap(), ExecutorKind::Auto);
        assert!(ExecutorKind::parse("yarn").unwrap_err().to_string().contains("'local', 'spark' or 'auto'"));
        let options = CompactionOptions::default();
        assert_eq!(spark_layout(&Layout::Binpack), "");
        assert_eq!(
            spark_layout(&Layout::Sort { terms: vec![OrderTerm::new("a`b", true, None)], table_order: false }),
            ", strategy => 'sort', sort_order => '`a``b` DESC NULLS LAST'"
        );
        assert_eq!(
            spark_layout(&Layout::Zorder(vec!["x".into(), "it's".into()])),
            ", strategy => 'sort', sort_order => 'zorder(`x`, `it\\'s`)'"
        );
        assert_eq!(
            spark_options(&options),
            "'target-file-size-bytes', '134217728', 'min-file-size-bytes', '67108864', 'min-input-files', '2', \
             'partial-progress.enabled', 'false', 'use-starting-sequence-number', 'true'"
        );
    }
}
