//! Executing a compaction plan: rewrite each group of small files with DuckDB, then commit one
//! `replace` snapshot that adds the new files and deletes the old ones.
//!
//! Safety rules:
//! - every output file must hold exactly the rows of its inputs less the deleted ones (checked
//!   before commit: rows and per-column non-null counts written plus those deleted, counted by a
//!   separate query, must equal the manifests' figures);
//! - a partition that live delete files apply to ([`crate::profile::applicable_deletes`]: the
//!   partition's own deletes, global ones of an unpartitioned spec, position deletes naming one of
//!   its files) is rewritten with those deletes applied, as the spec says a reader applies them
//!   ([`DeleteSet`]: position deletes by file path and row position when the data file's sequence
//!   number is at most the delete's, equality deletes by value, nulls equal, when it is below);
//!   with `apply_deletes := false`, or deletes it cannot apply (deletion vectors, ORC or Avro delete
//!   files, equality deletes on nested fields), the partition is skipped instead; the commit then
//!   removes the delete files that no longer apply to any live data file (dangling), and only
//!   those;
//! - new files take the data sequence number of the snapshot the rewrite started from (Java's
//!   `use-starting-sequence-number`), so an equality delete committed meanwhile still applies to
//!   exactly the rows it applied to;
//! - the commit is one new metadata file, made current atomically, and only on a table whose
//!   commits exclude other writers ([`crate::table::commit::is_exclusive`]); if the table moved on
//!   while we rewrote, the commit is retried on the new head when every replaced file is still
//!   live there and no position delete added meanwhile can apply to one (Java's
//!   `validateNoNewDeletesForDataFiles`), otherwise it is abandoned with
//!   [`ErrorKind::CommitConflict`];
//! - the work answers an interrupt (Ctrl-C) between groups and before the commit;
//! - on any failure the files we wrote (data, manifests, manifest lists) are removed, so the table
//!   is exactly as it was; replaced files stay on disk for older snapshots until expiry.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::path::Path;

use iceberg::io::FileIO;
use iceberg::spec::{
    DataContentType, DataFile as IcebergDataFile, DataFileBuilder, DataFileFormat, Datum, FormatVersion,
    ManifestContentType, ManifestFile, NestedField, Operation, PrimitiveType, Schema, Summary, TableMetadata,
    Transform, Type,
};

use crate::action::column_defaults::{
    default_text, expected_non_null, field_ids_by_file, has_defaults, skip_missing_identity_columns,
    skip_unwritable_defaults,
};
use crate::action::layout::{IcebergLayout, OrderedRows, iceberg_layout};
use crate::duck::{HostDb, Nested, quote_ident, quote_list, quote_literal};
use crate::error::{Error, ErrorKind, Result};
use crate::interrupt;
use crate::plan::compaction::{CompactionOptions, PartitionPlan, Verdict, plan_naming_deletes};
use crate::plan::layout::{Layout, LayoutOptions, is_recent};
use crate::runtime;
use crate::table::commit::{CommitOutcome, commit_table, pause_for_tests, relocate, require_exclusive};
use crate::table::iceberg::{
    IcebergTable, LoadedManifest, manifest_writer, new_snapshot_id, with_main_snapshot, write_manifest_list,
};
use crate::table::{self, DataFile, FileContent, Located, PartitionKey, Table, location_key, strip_file_scheme};

/// Commit attempts before giving up on a table that keeps moving.
const MAX_COMMIT_ATTEMPTS: usize = 4;

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
    /// could not be moved, a post-commit checkpoint that failed), for the caller to show.
    pub warning: Option<String>,
}

/// A rewrite's commit, as [`Rewrite::commit`] reports it.
pub(crate) struct Committed {
    /// The snapshot id (Iceberg) or version (Delta).
    pub id: i64,
    /// The metadata file or log entry that holds it.
    pub location: String,
    /// The data files it added.
    pub files: Vec<String>,
    /// See [`CompactionReport::warning`].
    pub warning: Option<String>,
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
}

/// A file written by the rewrite, ready for a manifest.
struct Written {
    local_path: String,
    /// `None` when every row of the inputs was deleted: nothing to add.
    data_file: Option<IcebergDataFile>,
    replaces: Vec<String>,
    spec_id: i32,
}

/// Plans, and (unless `dry_run`) rewrites and commits, on an Iceberg or a Delta table.
/// `known_ratio`: the output bytes per input byte a previous plan measured (then no sample is
/// rewritten, and the plan is that plan's, table unchanged); `None` measures.
pub fn compact(
    table: &Table,
    options: &CompactionOptions,
    dry_run: bool,
    host: &HostDb,
    known_ratio: Option<f64>,
) -> Result<CompactionReport> {
    options.validate()?;
    match table {
        Table::Iceberg { located, table } => {
            table.require_rewritable()?;
            run(&IcebergRewrite::new(located, table, &options.layout)?, options, dry_run, host, known_ratio)
        }
        Table::Delta(table) => {
            let rewrite = crate::action::compact_delta::DeltaRewrite::new(table, options)?;
            run(&rewrite, options, dry_run, host, known_ratio)
        }
    }
}

/// What a table format contributes to a compaction. The flow around it is [`run`]'s: plan,
/// measure the rewrite's output ratio and plan again, let the format skip what it cannot
/// rewrite, rewrite group by group (answering Ctrl-C between groups), commit once, and on any
/// failure remove every file written, so the table is exactly as it was.
pub(crate) trait Rewrite {
    /// A rewritten group, ready for the commit.
    type Written;
    /// What the format's delete files are called in a skip reason.
    const DELETES: &'static str = "delete files";
    /// Whether the rewrite applies delete files (else partitions with deletes are skipped).
    const APPLIES_DELETES: bool = false;
    /// The live files, in the model the planner takes.
    fn files(&self) -> &[DataFile];
    /// The layout the rewrite writes.
    fn layout(&self) -> Layout;
    /// The partitions whose time range ends after `now - window` (µs since the epoch), which
    /// `skip_recent_partitions` holds back.
    fn recent(&self, _now: i64, _window: i64) -> Vec<PartitionKey> {
        Vec::new()
    }
    /// The COPY of the planned files `group` into `target` (also what the calibration runs).
    fn copy_sql(&self, conn: &Nested, group: &[usize], target: &str) -> Result<String>;
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
    /// first written carries every replaced input.
    fn rewrite(
        &self,
        conn: &Nested,
        plan: &PartitionPlan,
        group: &[usize],
        outputs: usize,
    ) -> Result<Vec<Self::Written>>;
    /// Where a written file is on disk.
    fn local_path(written: &Self::Written) -> &Path;
    /// The written file as the table names it once committed (`None`: nothing was added).
    fn output(written: &Self::Written) -> Option<String>;
    /// Whether the layout sorts (then a partition is rewritten as one [`Unit`]).
    fn sorts(&self) -> bool {
        !matches!(self.layout(), Layout::Binpack)
    }
    /// Commits everything written. An error means nothing was committed (the flow then removes
    /// what was written), except [`ErrorKind::CommitUnknown`], after which every file is kept.
    fn commit(&self, written: &[Self::Written]) -> Result<Committed>;
    /// After a commit: per partition, the delete files it removed as dangling.
    fn deletes_removed(&self) -> HashMap<PartitionKey, u64> {
        HashMap::new()
    }
}

/// The compaction flow shared by every format ([`Rewrite`]).
pub(crate) fn run<R: Rewrite>(
    rewrite: &R,
    options: &CompactionOptions,
    dry_run: bool,
    host: &HostDb,
    known_ratio: Option<f64>,
) -> Result<CompactionReport> {
    let files = rewrite.files();
    let mut adjusted = options.clone();
    if !R::APPLIES_DELETES {
        adjusted.apply_deletes = false;
    }
    if let Some(window) = options.recent_window {
        adjusted.recent.extend(rewrite.recent(chrono::Utc::now().timestamp_micros(), window));
    }
    let options = &adjusted;
    let first_plan = plan_naming_deletes(files, options, 1.0, R::DELETES);
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
    };
    if report.plans.iter().all(|p| p.groups.is_empty()) {
        return Ok(report);
    }
    // Plan again on the sizes the rewrite will produce (a dry run measures too: the sample goes
    // to /dev/null, so the plan it shows is the plan a real run carries out).
    let conn = host.connect()?;
    if let Some(first) = files.first() {
        crate::duck::prepare_remote(&conn, &first.path)?;
    }
    let ratio = known_ratio.or_else(|| {
        measured_output_ratio(&conn, &report.plans, &|i| files[i].size_bytes, &|sample, target| {
            rewrite.copy_sql(&conn, sample, target)
        })
    });
    if let Some(r) = ratio
        && (r - 1.0).abs() > 0.1
    {
        report.plans = plan_naming_deletes(files, options, r, R::DELETES);
    }
    report.output_ratio = ratio;
    rewrite.skip_unsafe(&conn, &mut report.plans)?;
    let units = units(&report.plans, rewrite.sorts());
    report.groups = units
        .iter()
        .map(|u| GroupFiles {
            key: report.plans[u.plan].key.clone(),
            inputs: u.files.iter().map(|&i| files[i].path.clone()).collect(),
            input_bytes: u.files.iter().map(|&i| files[i].size_bytes).sum(),
            outputs: Vec::new(),
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
    let mut written: Vec<R::Written> = Vec::new();
    // Per unit: its range in `written`.
    let mut spans: Vec<std::ops::Range<usize>> = Vec::new();
    let result = (|| {
        for unit in &units {
            interrupt::check("nothing was committed")?;
            let start = written.len();
            written.extend(rewrite.rewrite(&conn, &report.plans[unit.plan], &unit.files, unit.outputs)?);
            spans.push(start..written.len());
        }
        rewrite.commit(&written)
    })();
    drop(conn);
    match result {
        Ok(committed) => {
            let removed = rewrite.deletes_removed();
            for p in &mut report.plans {
                p.delete_files_removed = removed.get(&p.key).copied().unwrap_or(0);
            }
            report.snapshot_id = Some(committed.id);
            report.metadata_location = Some(committed.location);
            report.written = committed.files;
            report.warning = committed.warning;
            for ((group, unit), span) in report.groups.iter_mut().zip(&units).zip(&spans) {
                group.outputs = written[span.clone()].iter().filter_map(R::output).collect();
                let plan = &mut report.plans[unit.plan];
                plan.files_written = Some(plan.files_written.unwrap_or(0) + group.outputs.len() as u64);
            }
            Ok(report)
        }
        Err(e) if e.kind() == ErrorKind::CommitUnknown => Err(e),
        Err(e) => {
            crate::store::remove_quietly(written.iter().filter_map(|w| R::local_path(w).to_str()));
            Err(e)
        }
    }
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
}

/// The rewrites of the compacting plans, in plan order ([`Unit`]).
fn units(plans: &[PartitionPlan], sorts: bool) -> Vec<Unit> {
    let mut out = Vec::new();
    for (i, p) in plans.iter().enumerate().filter(|(_, p)| p.verdict == Verdict::Compact) {
        if sorts {
            let mut files: Vec<usize> = p.groups.iter().flatten().copied().collect();
            files.sort_unstable();
            out.push(Unit { plan: i, files, outputs: p.groups.len() });
        } else {
            out.extend(p.groups.iter().map(|g| Unit { plan: i, files: g.clone(), outputs: 1 }));
        }
    }
    out
}

/// An Iceberg table's part in a compaction: the current snapshot's live files, rewritten by
/// field id with the delete files that apply to them applied, committed as one `replace`
/// snapshot that also removes the delete files left dangling ([`commit_with_retries`]).
struct IcebergRewrite<'a> {
    located: &'a Located,
    table: &'a IcebergTable,
    manifests: Vec<LoadedManifest>,
    files: Vec<DataFile>,
    /// For each model file: its manifest and entry.
    sources: Vec<(usize, usize)>,
    starting_sequence_number: i64,
    /// Model indices of the live delete files.
    delete_files: Vec<usize>,
    /// For position delete files read by a rewrite: the data file paths they name.
    named_paths: RefCell<HashMap<usize, HashSet<String>>>,
    /// After the commit: per partition, the delete files it removed.
    removed: RefCell<HashMap<PartitionKey, u64>>,
    /// The order rows are written in, and the sort order id the files carry.
    layout: IcebergLayout,
}

impl<'a> IcebergRewrite<'a> {
    fn new(located: &'a Located, table: &'a IcebergTable, layout: &LayoutOptions) -> Result<Self> {
        let layout = iceberg_layout(layout, &table.metadata)?;
        let manifests = table.load_manifests()?;
        let (mut files, mut sources) = (Vec::new(), Vec::new());
        for (m, loaded) in manifests.iter().enumerate() {
            let model = table.model_files(loaded);
            let alive = loaded.manifest.entries().iter().enumerate().filter(|(_, e)| e.is_alive()).map(|(i, _)| i);
            for (file, entry) in model.into_iter().zip(alive) {
                files.push(file);
                sources.push((m, entry));
            }
        }
        let starting_sequence_number = table.metadata.current_snapshot().map_or(0, |s| s.sequence_number());
        let delete_files = (0..files.len()).filter(|&i| files[i].content != FileContent::Data).collect();
        Ok(Self {
            located,
            table,
            manifests,
            files,
            sources,
            starting_sequence_number,
            delete_files,
            named_paths: RefCell::new(HashMap::new()),
            removed: RefCell::new(HashMap::new()),
            layout,
        })
    }

    /// The time partitions (year, month, day, hour transforms; identity on a date, as days)
    /// ending after `now - window` ([`crate::table::partition::time_range`]).
    fn recent_partitions(&self, now: i64, window: i64) -> Vec<PartitionKey> {
        let schema = self.table.metadata.current_schema();
        let mut recent: Vec<PartitionKey> = Vec::new();
        for (i, file) in self.files.iter().enumerate() {
            if file.content != FileContent::Data || recent.contains(&file.key) {
                continue;
            }
            let Some(spec) = self.table.metadata.partition_spec_by_id(file.spec_id) else { continue };
            let values = self.source(i).partition();
            let open = spec.fields().iter().zip(values.iter()).any(|(field, value)| {
                let date = || {
                    schema
                        .field_by_id(field.source_id)
                        .is_some_and(|f| f.field_type.as_ref() == &Type::Primitive(PrimitiveType::Date))
                };
                let transform = match field.transform {
                    Transform::Year | Transform::Month | Transform::Day | Transform::Hour => field.transform,
                    Transform::Identity if date() => Transform::Day,
                    _ => return false,
                };
                let Some(iceberg::spec::Literal::Primitive(value)) = value else { return false };
                crate::table::partition::time_range_micros(transform, value)
                    .is_some_and(|range| is_recent(range, now, window))
            });
            if open {
                recent.push(file.key.clone());
            }
        }
        recent
    }

    /// The manifest entry's data file of model file `i`.
    fn source(&self, i: usize) -> &IcebergDataFile {
        let (m, e) = self.sources[i];
        self.manifests[m].manifest.entries()[e].data_file()
    }

    /// The live delete files that can delete rows of one of the data files `group`.
    fn deletes_for(&self, group: &[usize]) -> Vec<usize> {
        self.delete_files
            .iter()
            .copied()
            .filter(|&d| group.iter().any(|&i| self.files[d].applies_to(&self.files[i])))
            .collect()
    }

    /// The group's inputs and deletes, with their data sequence numbers.
    fn inputs(&self, group: &[usize]) -> (Vec<Input<'_>>, Vec<Input<'_>>) {
        let input = |i: usize| Input { file: self.source(i), sequence_number: self.files[i].data_sequence_number };
        (group.iter().map(|&i| input(i)).collect(), self.deletes_for(group).into_iter().map(input).collect())
    }

    /// Why the deletes that apply to `group` cannot be applied by the rewrite, if they cannot.
    fn unappliable_deletes(&self, group: &[usize]) -> Option<String> {
        let schema = self.table.metadata.current_schema();
        let deletes = self.deletes_for(group);
        let not_parquet = deletes.iter().filter(|&&d| !self.files[d].parquet).count();
        if not_parquet > 0 {
            return Some(format!(
                "{not_parquet} of its delete files are not Parquet (deletion vectors, ORC or Avro), which compaction \
                 does not apply"
            ));
        }
        for &d in deletes.iter().filter(|&&d| self.files[d].content == FileContent::EqualityDeletes) {
            let ids = self.source(d).equality_ids().unwrap_or_default();
            if ids.is_empty() {
                return Some(format!("equality delete file '{}' names no equality fields", self.files[d].path));
            }
            let top_level = |id: &i32| {
                schema.as_struct().fields().iter().any(|f| f.id == *id && f.field_type.is_primitive())
                    && schema
                        .field_by_id(*id)
                        .and_then(|f| f.field_type.as_primitive_type().and_then(duckdb_type))
                        .is_some()
            };
            if let Some(id) = ids.iter().find(|id| !top_level(id)) {
                return Some(format!(
                    "an equality delete file applies by field id {id}, which is not a top-level primitive column of the \
                     current schema, so its deletes cannot be applied"
                ));
            }
        }
        None
    }

    /// Reads which data files the position delete files of `inputs` name, for the dangling check.
    fn record_named_paths(&self, conn: &Nested, group: &[usize]) -> Result<()> {
        let wanted: Vec<usize> = self
            .deletes_for(group)
            .into_iter()
            .filter(|&d| self.files[d].content == FileContent::PositionDeletes)
            .filter(|&d| self.files[d].referenced_data_file.is_none())
            .filter(|d| !self.named_paths.borrow().contains_key(d))
            .collect();
        if wanted.is_empty() {
            return Ok(());
        }
        let local: Vec<String> = wanted.iter().map(|&d| strip_file_scheme(&self.files[d].path).to_string()).collect();
        let list = quote_list(&local);
        let result = conn.query(&format!(
            "SELECT DISTINCT __lakehouse_delete, file_path FROM read_parquet({list}, union_by_name = true, \
             filename = '__lakehouse_delete')"
        ))?;
        let mut named = self.named_paths.borrow_mut();
        for &d in &wanted {
            named.entry(d).or_default();
        }
        for row in &result.rows {
            let (Some(file), Some(path)) = (row[0].text(), row[1].text()) else { continue };
            if let Some(k) = local.iter().position(|l| l == file) {
                named.entry(wanted[k]).or_default().insert(path.to_string());
            }
        }
        Ok(())
    }

    /// The delete files that applied to a replaced file, as candidates for removal once dangling.
    fn removal_candidates(&self, replaced: &HashSet<&str>) -> Vec<Candidate> {
        let replaced_files: Vec<usize> =
            (0..self.files.len()).filter(|&i| replaced.contains(self.files[i].path.as_str())).collect();
        let named = self.named_paths.borrow();
        self.deletes_for(&replaced_files)
            .into_iter()
            .map(|d| {
                let file = self.files[d].clone();
                let targets = match (&file.content, &file.referenced_data_file) {
                    (FileContent::PositionDeletes, Some(one)) => Some(HashSet::from([location_key(one)])),
                    (FileContent::PositionDeletes, None) => {
                        named.get(&d).map(|paths| paths.iter().map(|p| location_key(p)).collect())
                    }
                    _ => None,
                };
                let partitions: HashSet<PartitionKey> = replaced_files
                    .iter()
                    .filter(|&&i| file.applies_to(&self.files[i]))
                    .map(|&i| self.files[i].key.clone())
                    .collect();
                Candidate { file, targets, partitions }
            })
            .collect()
    }
}

/// A file a rewrite reads, with its data sequence number.
struct Input<'a> {
    file: &'a IcebergDataFile,
    sequence_number: i64,
}

/// A delete file that applied to a replaced data file: removed by the commit when no live data
/// file is left that it can delete rows of ([`dangling_deletes`]).
#[derive(Debug, Clone)]
struct Candidate {
    file: DataFile,
    /// For a position delete file: the data files it names (`None`: unknown, then any live file
    /// of its scope and sequence range keeps it).
    targets: Option<HashSet<std::path::PathBuf>>,
    /// The partitions of the replaced files it applied to (for the report).
    partitions: HashSet<PartitionKey>,
}

/// The candidates that no live data file of `head` (other than the `replaced` ones) needs: an
/// equality delete when no such file is in its scope with a lower data sequence number; a
/// position delete when none it names (or, unknown, none in its scope and range) is live. The
/// rewritten files take the starting sequence number, which no earlier delete applies to, and
/// paths no delete names. A candidate no longer live in `head` is not removed (again).
fn dangling_deletes<'c>(
    head: &[DataFile],
    replaced: &HashSet<&str>,
    candidates: &'c [Candidate],
) -> Vec<&'c Candidate> {
    let live: HashSet<&str> = head.iter().map(|f| f.path.as_str()).collect();
    let data: Vec<&DataFile> =
        head.iter().filter(|f| f.content == FileContent::Data && !replaced.contains(f.path.as_str())).collect();
    candidates
        .iter()
        .filter(|c| live.contains(c.file.path.as_str()))
        .filter(|c| {
            !data.iter().any(|d| {
                c.file.applies_to(d) && c.targets.as_ref().is_none_or(|named| named.contains(&location_key(&d.path)))
            })
        })
        .collect()
}

impl Rewrite for IcebergRewrite<'_> {
    type Written = Written;
    const APPLIES_DELETES: bool = true;

    fn files(&self) -> &[DataFile] {
        &self.files
    }

    fn layout(&self) -> Layout {
        self.layout.layout.clone()
    }

    fn recent(&self, now: i64, window: i64) -> Vec<PartitionKey> {
        self.recent_partitions(now, window)
    }

    fn copy_sql(&self, conn: &Nested, group: &[usize], target: &str) -> Result<String> {
        let (inputs, deletes) = self.inputs(group);
        Ok(copy_sql(conn, self.table, &inputs, &deletes, target, &self.layout)?.0)
    }

    fn skip_unsafe(&self, conn: &Nested, plans: &mut [PartitionPlan]) -> Result<()> {
        for p in plans.iter_mut().filter(|p| p.verdict == Verdict::Compact && p.delete_files > 0) {
            let members: Vec<usize> = p.groups.iter().flatten().copied().collect();
            if let Some(why) = self.unappliable_deletes(&members) {
                p.skip(&format!("has {} delete files; {why}", p.delete_files));
            }
        }
        let sources: Vec<&IcebergDataFile> = (0..self.files.len()).map(|i| self.source(i)).collect();
        let schema = self.table.metadata.current_schema();
        skip_misread_nested_fields(conn, schema, plans, &sources)?;
        let input_paths = |p: &PartitionPlan| -> Vec<String> {
            p.groups.iter().flatten().map(|&i| strip_file_scheme(sources[i].file_path()).to_string()).collect()
        };
        skip_unwritable_defaults(conn, schema, plans, &input_paths)?;
        let local = |i: usize| strip_file_scheme(sources[i].file_path()).to_string();
        skip_missing_identity_columns(conn, &self.table.metadata, plans, &sources, &local)
    }

    fn check_commit(&self) -> Result<()> {
        require_exclusive(self.located)
    }

    fn rewrite(&self, conn: &Nested, plan: &PartitionPlan, group: &[usize], outputs: usize) -> Result<Vec<Written>> {
        let (inputs, deletes) = self.inputs(group);
        let written = rewrite_group(conn, self.table, &inputs, &deletes, plan.spec_id, &self.layout, outputs)?;
        if let Err(e) = self.record_named_paths(conn, group) {
            crate::store::remove_quietly(written.iter().map(|w| w.local_path.as_str()));
            return Err(e);
        }
        Ok(written)
    }

    fn local_path(written: &Written) -> &Path {
        Path::new(&written.local_path)
    }

    fn output(written: &Written) -> Option<String> {
        written.data_file.as_ref().map(|f| f.file_path().to_string())
    }

    fn commit(&self, written: &[Written]) -> Result<Committed> {
        let base = Base {
            located: self.located.clone(),
            table: self.table.clone(),
            manifests: self.manifests.clone(),
            add_order: self.layout.add.clone(),
        };
        let replaced: HashSet<&str> = written.iter().flat_map(|w| w.replaces.iter().map(String::as_str)).collect();
        let candidates = self.removal_candidates(&replaced);
        let (outcome, removed) = commit_with_retries(base, self.starting_sequence_number, written, &candidates)?;
        let mut by_partition: HashMap<PartitionKey, u64> = HashMap::new();
        for c in removed {
            for key in &c.partitions {
                *by_partition.entry(key.clone()).or_default() += 1;
            }
        }
        *self.removed.borrow_mut() = by_partition;
        Ok(Committed {
            files: written.iter().filter_map(|w| w.data_file.as_ref()).map(|f| f.file_path().to_string()).collect(),
            ..outcome
        })
    }

    fn deletes_removed(&self) -> HashMap<PartitionKey, u64> {
        self.removed.borrow().clone()
    }
}

/// The `SELECT` of the live data files `paths` of `table` with the delete files that apply to
/// them applied ([`DeleteSet`]), as the current schema's columns; `None` when no delete applies.
/// What the gate's measured scan reads, so that it reads the rows a reader of the table sees.
pub(crate) fn merge_on_read_select(
    conn: &Nested,
    located: &Located,
    table: &IcebergTable,
    paths: &[String],
) -> Result<Option<String>> {
    let rewrite = IcebergRewrite::new(located, table, &LayoutOptions::default())?;
    let wanted: HashSet<&str> = paths.iter().map(String::as_str).collect();
    let group: Vec<usize> = (0..rewrite.files.len())
        .filter(|&i| rewrite.files[i].content == FileContent::Data && wanted.contains(rewrite.files[i].path.as_str()))
        .collect();
    let (inputs, deletes) = rewrite.inputs(&group);
    if deletes.is_empty() || inputs.is_empty() {
        return Ok(None);
    }
    let schema = table.metadata.current_schema();
    let local: Vec<String> = inputs.iter().map(|i| strip_file_scheme(i.file.file_path()).to_string()).collect();
    let ids = files_have_field_ids(conn, &local)?;
    Ok(Some(DeleteSet::new(conn, schema, &inputs, &deletes, ids)?.select_sql(schema)))
}

/// DuckDB's name for an Iceberg primitive type.
fn duckdb_type(ty: &PrimitiveType) -> Option<String> {
    Some(match ty {
        PrimitiveType::Boolean => "BOOLEAN".into(),
        PrimitiveType::Int => "INTEGER".into(),
        PrimitiveType::Long => "BIGINT".into(),
        PrimitiveType::Float => "FLOAT".into(),
        PrimitiveType::Double => "DOUBLE".into(),
        PrimitiveType::Decimal { precision, scale } => format!("DECIMAL({precision}, {scale})"),
        PrimitiveType::Date => "DATE".into(),
        PrimitiveType::Time => "TIME".into(),
        PrimitiveType::Timestamp => "TIMESTAMP".into(),
        PrimitiveType::Timestamptz => "TIMESTAMPTZ".into(),
        PrimitiveType::TimestampNs => "TIMESTAMP_NS".into(),
        PrimitiveType::String => "VARCHAR".into(),
        PrimitiveType::Uuid => "UUID".into(),
        PrimitiveType::Fixed(_) | PrimitiveType::Binary => "BLOB".into(),
        PrimitiveType::TimestamptzNs => return None,
    })
}

/// DuckDB's name for an Iceberg type, nested ones included (struct children by name).
fn duckdb_type_of(ty: &Type) -> Option<String> {
    Some(match ty {
        Type::Primitive(p) => duckdb_type(p)?,
        Type::Struct(s) => {
            let children: Option<Vec<String>> = s
                .fields()
                .iter()
                .map(|f| Some(format!("{} {}", quote_ident(&f.name), duckdb_type_of(&f.field_type)?)))
                .collect();
            format!("STRUCT({})", children?.join(", "))
        }
        Type::List(l) => format!("{}[]", duckdb_type_of(&l.element_field.field_type)?),
        Type::Map(m) => {
            format!("MAP({}, {})", duckdb_type_of(&m.key_field.field_type)?, duckdb_type_of(&m.value_field.field_type)?)
        }
    })
}

/// A leaf (primitive) column of the current schema, as DuckDB's `parquet_metadata` names it in
/// a file DuckDB wrote (`s, x`; `l, list, element`; `m, key_value, key`).
#[derive(Debug, Clone)]
struct Leaf {
    id: i32,
    name: String,
    ty: PrimitiveType,
    /// Inside a list or map: its value and null counts follow writer-specific rules for empty
    /// and null collections, so they are recorded but not compared, and it gets no bounds.
    repeated: bool,
}

/// Every leaf of `schema` by its DuckDB path.
fn leaves(schema: &Schema) -> HashMap<String, Leaf> {
    fn walk(field: &NestedField, path: String, repeated: bool, out: &mut HashMap<String, Leaf>) {
        match field.field_type.as_ref() {
            Type::Primitive(ty) => {
                out.insert(path.clone(), Leaf { id: field.id, name: path, ty: ty.clone(), repeated });
            }
            Type::Struct(s) => {
                for child in s.fields() {
                    walk(child, format!("{path}, {}", child.name), repeated, out);
                }
            }
            Type::List(l) => walk(&l.element_field, format!("{path}, list, element"), true, out),
            Type::Map(m) => {
                walk(&m.key_field, format!("{path}, key_value, key"), true, out);
                walk(&m.value_field, format!("{path}, key_value, value"), true, out);
            }
        }
    }
    let mut out = HashMap::new();
    for field in schema.as_struct().fields() {
        walk(field, field.name.clone(), false, &mut out);
    }
    out
}

/// `FIELD_IDS` value for one field: the id, or a struct naming children's ids.
fn field_ids(field: &NestedField) -> String {
    match field.field_type.as_ref() {
        Type::Primitive(_) => field.id.to_string(),
        Type::Struct(s) => {
            let children: Vec<String> =
                s.fields().iter().map(|f| format!("{}: {}", quote_ident(&f.name), field_ids(f))).collect();
            format!("{{__duckdb_field_id: {}, {}}}", field.id, children.join(", "))
        }
        Type::List(l) => format!("{{__duckdb_field_id: {}, element: {}}}", field.id, field_ids(&l.element_field)),
        Type::Map(m) => format!(
            "{{__duckdb_field_id: {}, key: {}, value: {}}}",
            field.id,
            field_ids(&m.key_field),
            field_ids(&m.value_field)
        ),
    }
}

/// The `SELECT` reading `inputs` as the current schema: top-level columns by field id (renames
/// and added columns resolve like Iceberg readers) when the files carry field ids, the children
/// of nested columns by name (DuckDB casts structs by name; [`check_nested_names`] refuses files
/// where that would differ from reading by id); by name otherwise (files registered without ids,
/// e.g. pyiceberg `add_files`, are read through their column names, as Iceberg's name mapping
/// does).
pub(crate) fn select_sql(schema: &Schema, inputs: &[String], files_have_ids: bool) -> Result<String> {
    let columns = schema.as_struct().fields().iter().map(|f| quote_ident(&f.name)).collect::<Vec<_>>().join(", ");
    let source = parquet_source(schema, inputs, files_have_ids, "")?;
    Ok(format!("SELECT {columns} FROM {source}"))
}

/// The `read_parquet(…)` of [`select_sql`], with `extra` options appended (`, filename = …`).
/// A file without a top-level column reads it as its initial-default, as readers see it; a
/// default this version cannot render is an error (compaction skipped such partitions before:
/// [`crate::action::column_defaults`]).
fn parquet_source(schema: &Schema, inputs: &[String], files_have_ids: bool, extra: &str) -> Result<String> {
    let files = quote_list(inputs);
    if !files_have_ids {
        return Ok(format!("read_parquet({files}, union_by_name = true{extra})"));
    }
    let mut entries = Vec::new();
    for f in schema.as_struct().fields() {
        let default = match default_text(f) {
            Ok(Some(text)) => quote_literal(&text),
            Ok(None) => "NULL".to_string(),
            Err(why) => return Err(Error::new(ErrorKind::Unsupported, why)),
        };
        let Some(ty) = duckdb_type_of(&f.field_type) else {
            return Ok(format!("read_parquet({files}, union_by_name = true{extra})"));
        };
        entries.push(format!(
            "{}: {{name: {}, type: {}, default_value: {default}}}",
            f.id,
            quote_literal(&f.name),
            quote_literal(&ty)
        ));
    }
    Ok(format!("read_parquet({files}, schema = MAP {{{}}}{extra})", entries.join(", ")))
}

fn compression(table: &IcebergTable) -> &'static str {
    match table.metadata.properties().get("write.parquet.compression-codec").map(|s| s.to_lowercase()).as_deref() {
        Some("snappy") => "snappy",
        Some("gzip") => "gzip",
        Some("lz4") | Some("lz4_raw") => "lz4",
        Some("brotli") => "brotli",
        Some("uncompressed") | Some("none") => "uncompressed",
        _ => "zstd",
    }
}

/// The `COPY … TO target (FORMAT parquet, …, RETURN_STATS)` that rewrites `inputs` as one file:
/// read as the current schema (by field id or by name, see [`select_sql`]), the rows `deletes`
/// delete left out ([`DeleteSet`]), in `sort` order ([`crate::action::layout`]), with its codec and the current
/// schema's field ids. Also, when there are deletes, the query counting the deleted rows and
/// their non-null values per checked leaf column ([`DeleteSet::deleted_counts_sql`]).
fn copy_sql(
    conn: &Nested,
    table: &IcebergTable,
    inputs: &[Input<'_>],
    deletes: &[Input<'_>],
    target: &str,
    layout: &IcebergLayout,
) -> Result<(String, Option<DeletedCounts>)> {
    let (rows, deleted) = rewrite_select(conn, table, inputs, deletes, layout)?;
    Ok((format!("COPY ({}) TO {} {}", rows.sql(), quote_literal(target), copy_options(table)), deleted))
}

/// The `SELECT` of [`copy_sql`] in the layout's order, and its deleted-counts query.
fn rewrite_select(
    conn: &Nested,
    table: &IcebergTable,
    inputs: &[Input<'_>],
    deletes: &[Input<'_>],
    layout: &IcebergLayout,
) -> Result<(OrderedRows, Option<DeletedCounts>)> {
    let schema = table.metadata.current_schema();
    let local_inputs: Vec<String> = inputs.iter().map(|f| strip_file_scheme(f.file.file_path()).to_string()).collect();
    // With the manifests' value/null counts on every input, the non-null check after the rewrite
    // catches any file read the wrong way, so one footer decides; otherwise every footer does.
    let files: Vec<&IcebergDataFile> = inputs.iter().map(|i| i.file).collect();
    let probe = if has_column_counts(&files, schema) { &local_inputs[..1] } else { &local_inputs[..] };
    let files_have_ids = files_have_field_ids(conn, probe)?;
    let (select, deleted) = if deletes.is_empty() {
        (select_sql(schema, &local_inputs, files_have_ids)?, None)
    } else {
        let set = DeleteSet::new(conn, schema, inputs, deletes, files_have_ids)?;
        (set.select_sql(schema), Some(set.deleted_counts_sql()))
    };
    Ok((layout.order.rows(conn, select)?, deleted))
}

/// The `COPY` options of a rewrite: Parquet with the table's codec and the current schema's
/// field ids, returning the file's statistics.
fn copy_options(table: &IcebergTable) -> String {
    let ids = table
        .metadata
        .current_schema()
        .as_struct()
        .fields()
        .iter()
        .map(|f| format!("{}: {}", quote_ident(&f.name), field_ids(f)))
        .collect::<Vec<_>>()
        .join(", ");
    format!("(FORMAT parquet, COMPRESSION {}, FIELD_IDS {{{ids}}}, RETURN_STATS)", compression(table))
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

/// The query counting a group's deleted rows and their non-null values, with the field ids of
/// the counted leaves in order ([`DeleteSet::deleted_counts_sql`]).
type DeletedCounts = (String, Vec<i32>);

/// A rewrite group's data files with the delete files that apply to them, as SQL. The rows kept
/// are the spec's: a row is deleted by a position delete whose `file_path` is the data file's
/// path as the manifest writes it and whose `pos` is the row's position in the file, when the
/// data file's data sequence number is at most the delete file's; and by an equality delete whose
/// values equal the row's in every equality column (null equal to null), when the data file's
/// data sequence number is below the delete file's. Partition scope was settled when the delete
/// files were chosen ([`DataFile::applies_to`]).
struct DeleteSet {
    /// The data files with file name and row position: `__d`, joined to their manifest path and
    /// sequence number, `__f`.
    data: String,
    /// (subquery, join condition) per delete source.
    sources: Vec<(String, String)>,
    /// The leaf columns checked after the rewrite, as SQL expressions over `__d`, by field id.
    leaves: Vec<(i32, String)>,
}

impl DeleteSet {
    fn new(
        conn: &Nested,
        schema: &Schema,
        inputs: &[Input<'_>],
        deletes: &[Input<'_>],
        files_have_ids: bool,
    ) -> Result<Self> {
        let local = |f: &IcebergDataFile| strip_file_scheme(f.file_path()).to_string();
        let sequence_table = |files: &[&Input<'_>], with_path: bool| {
            let rows: Vec<String> = files
                .iter()
                .map(|i| {
                    let path =
                        if with_path { format!(", {}", quote_literal(i.file.file_path())) } else { String::new() };
                    format!("({}{path}, {}::BIGINT)", quote_literal(&local(i.file)), i.sequence_number)
                })
                .collect();
            format!("(VALUES {})", rows.join(", "))
        };
        let local_inputs: Vec<String> = inputs.iter().map(|i| local(i.file)).collect();
        let source = parquet_source(
            schema,
            &local_inputs,
            files_have_ids,
            ", filename = '__lakehouse_file', file_row_number = true",
        )?;
        let all: Vec<&Input<'_>> = inputs.iter().collect();
        let data = format!(
            "{source} AS __d JOIN {} AS __f(__file, __path, __seq) ON __d.__lakehouse_file = __f.__file",
            sequence_table(&all, true)
        );
        let mut sources = Vec::new();
        let position: Vec<&Input<'_>> =
            deletes.iter().filter(|d| d.file.content_type() == DataContentType::PositionDeletes).collect();
        if !position.is_empty() {
            let files: Vec<String> = position.iter().map(|d| local(d.file)).collect();
            sources.push((
                format!(
                    "(SELECT __r.file_path AS __path, __r.pos AS __pos, __s.__seq FROM read_parquet({}, union_by_name = true, \
                     filename = '__lakehouse_delete') AS __r JOIN {} AS __s(__file, __seq) ON __r.__lakehouse_delete = __s.__file)",
                    quote_list(&files),
                    sequence_table(&position, false)
                ),
                "__x.__path = __f.__path AND __x.__pos = __d.file_row_number AND __f.__seq <= __x.__seq".to_string(),
            ));
        }
        // Equality deletes, one source per set of equality fields.
        let mut by_fields: std::collections::BTreeMap<Vec<i32>, Vec<&Input<'_>>> = Default::default();
        for d in deletes.iter().filter(|d| d.file.content_type() == DataContentType::EqualityDeletes) {
            let mut ids = d.file.equality_ids().unwrap_or_default();
            ids.sort_unstable();
            ids.dedup();
            by_fields.entry(ids).or_default().push(d);
        }
        for (ids, files) in by_fields {
            let paths: Vec<String> = files.iter().map(|d| local(d.file)).collect();
            let fields: Vec<(&NestedField, String)> = ids
                .iter()
                .map(|id| {
                    let field = schema.field_by_id(*id).filter(|f| f.field_type.is_primitive());
                    let ty = field.and_then(|f| f.field_type.as_primitive_type().and_then(duckdb_type));
                    match (field, ty) {
                        (Some(f), Some(t)) => Ok((f.as_ref(), t)),
                        _ => Err(Error::new(
                            ErrorKind::Unsupported,
                            format!("equality deletes on field id {id} cannot be applied; nothing was committed"),
                        )),
                    }
                })
                .collect::<Result<_>>()?;
            let by_id = files_have_field_ids(conn, &paths)?;
            let reader = if by_id {
                let entries: Vec<String> = fields
                    .iter()
                    .enumerate()
                    .map(|(k, (f, t))| {
                        format!("{}: {{name: '__k{k}', type: {}, default_value: NULL}}", f.id, quote_literal(t))
                    })
                    .collect();
                format!(
                    "(SELECT __r.* EXCLUDE (__lakehouse_delete), __s.__seq FROM read_parquet({}, schema = MAP {{{}}}, \
                     filename = '__lakehouse_delete') AS __r",
                    quote_list(&paths),
                    entries.join(", ")
                )
            } else {
                let columns: Vec<String> = fields
                    .iter()
                    .enumerate()
                    .map(|(k, (f, t))| format!("CAST(__r.{} AS {t}) AS __k{k}", quote_ident(&f.name)))
                    .collect();
                format!(
                    "(SELECT {}, __s.__seq FROM read_parquet({}, union_by_name = true, filename = '__lakehouse_delete') AS __r",
                    columns.join(", "),
                    quote_list(&paths)
                )
            };
            let condition: Vec<String> = std::iter::once("__f.__seq < __x.__seq".to_string())
                .chain(
                    fields
                        .iter()
                        .enumerate()
                        .map(|(k, (f, _))| format!("__d.{} IS NOT DISTINCT FROM __x.__k{k}", quote_ident(&f.name))),
                )
                .collect();
            sources.push((
                format!(
                    "{reader} JOIN {} AS __s(__file, __seq) ON __r.__lakehouse_delete = __s.__file)",
                    sequence_table(&files, false)
                ),
                condition.join(" AND "),
            ));
        }
        let leaves = leaves(schema)
            .into_values()
            .filter(|l| !l.repeated)
            .map(|l| (l.id, format!("__d.{}", l.name.split(", ").map(quote_ident).collect::<Vec<_>>().join("."))))
            .collect();
        Ok(Self { data, sources, leaves })
    }

    /// The rows kept, as the current schema's columns (ordered by the caller: [`OrderedRows`]).
    fn select_sql(&self, schema: &Schema) -> String {
        let mut kept = format!("SELECT __d.* FROM {}", self.data);
        for (k, (source, condition)) in self.sources.iter().enumerate() {
            kept.push_str(&format!(
                " ANTI JOIN {source} AS __x{k} ON {}",
                condition.replace("__x.", &format!("__x{k}."))
            ));
        }
        let columns = schema.as_struct().fields().iter().map(|f| quote_ident(&f.name)).collect::<Vec<_>>().join(", ");
        format!("SELECT {columns} FROM ({kept})")
    }

    /// Counts of the deleted rows: `count(*)`, then `count(leaf)` for each of [`Self::leaves`],
    /// by a mark join (`EXISTS`), not the anti join the rewrite uses; with the leaves' field ids,
    /// in the order of their counts.
    fn deleted_counts_sql(&self) -> DeletedCounts {
        let exists: Vec<String> = self
            .sources
            .iter()
            .map(|(source, condition)| format!("EXISTS (SELECT 1 FROM {source} AS __x WHERE {condition})"))
            .collect();
        let counts: Vec<String> = std::iter::once("count(*)".to_string())
            .chain(self.leaves.iter().map(|(_, e)| format!("count({e})")))
            .collect();
        let sql = format!("SELECT {} FROM {} WHERE {}", counts.join(", "), self.data, exists.join(" OR "));
        (sql, self.leaves.iter().map(|(id, _)| *id).collect())
    }
}

/// Input bytes rewritten to `/dev/null` to measure how the rewrite changes sizes.
const CALIBRATION_SAMPLE_BYTES: u64 = 16 * 1024 * 1024;

/// Output bytes per input byte of a rewrite, measured by rewriting a sample of the files the
/// plan compacts (up to [`CALIBRATION_SAMPLE_BYTES`] from its largest partition) to `/dev/null`:
/// a change of codec (Snappy in, zstd out) or many per-file footers make outputs much smaller
/// than their inputs, and planning on input bytes alone would miss the target by as much.
/// `size_of` gives a planned file's size, `copy_to` the format's COPY of some planned files to a
/// target. Writes nothing anywhere; `None` when it cannot be measured.
pub(crate) fn measured_output_ratio(
    conn: &Nested,
    plans: &[PartitionPlan],
    size_of: &dyn Fn(usize) -> u64,
    copy_to: &dyn Fn(&[usize], &str) -> Result<String>,
) -> Option<f64> {
    let largest = plans.iter().filter(|p| p.verdict == Verdict::Compact).max_by_key(|p| p.bytes_to_rewrite)?;
    // Files in manifest (arrival) order, not the groups' largest-first order, so that the
    // sample has the partition's mix of sizes (and footers); none that would overshoot the cap,
    // but at least one.
    let mut members: Vec<usize> = largest.groups.iter().flatten().copied().collect();
    members.sort_unstable();
    let mut sample: Vec<usize> = Vec::new();
    let mut sample_bytes = 0u64;
    for i in members {
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

/// Rewrites one group into `outputs` files (in layout order, [`copy_in_order`]) next to its first
/// input, with `deletes` applied; checks the rows and per-column non-null counts written, plus
/// those deleted, against the manifests. A file that gets no row (every row deleted) is not
/// added; the first written carries the replaced inputs.
fn rewrite_group(
    conn: &Nested,
    table: &IcebergTable,
    inputs: &[Input<'_>],
    deletes: &[Input<'_>],
    spec_id: i32,
    layout: &IcebergLayout,
    outputs: usize,
) -> Result<Vec<Written>> {
    let first = inputs[0].file;
    let dir = output_dir(table, first, spec_id);
    let file_paths: Vec<String> =
        (0..outputs.max(1)).map(|_| format!("{dir}/{}-compacted.parquet", uuid::Uuid::new_v4())).collect();
    let local_paths: Vec<String> = file_paths.iter().map(|p| strip_file_scheme(p).to_string()).collect();
    if !crate::store::is_remote(&local_paths[0])
        && let Some(parent) = Path::new(&local_paths[0]).parent()
    {
        std::fs::create_dir_all(parent)?;
    }
    if inputs.iter().any(|f| f.file.partition() != first.partition()) {
        return Err(Error::new(
            ErrorKind::CorruptMetadata,
            "a rewrite group mixes partitions; nothing was committed (this is a bug, please report it)",
        ));
    }
    let schema = table.metadata.current_schema();
    let files: Vec<&IcebergDataFile> = inputs.iter().map(|i| i.file).collect();
    let (rows_in_order, deleted_sql) = rewrite_select(conn, table, inputs, deletes, layout)?;
    let options = copy_options(table);
    let written = (|| {
        // What the deletes remove, counted by a query of its own before the rewrite.
        let deleted = match &deleted_sql {
            None => Deleted::default(),
            Some((sql, ids)) => Deleted::read(conn, sql, ids)?,
        };
        let copied = copy_in_order(conn, &rows_in_order, &local_paths, &|select, target| {
            format!("COPY ({select}) TO {} {options}", quote_literal(target))
        })?;
        let rows: u64 = copied.iter().map(|(rows, _)| rows).sum();
        let listed: u64 = files.iter().map(|f| f.record_count()).sum();
        if rows + deleted.rows != listed {
            return Err(Error::new(
                ErrorKind::CorruptMetadata,
                format!(
                    "rewrite of {} files produced {rows} rows and the deletes removed {}, the manifests list {listed}; \
                     nothing was committed",
                    inputs.len(),
                    deleted.rows
                ),
            ));
        }
        let stats = local_paths.iter().map(|p| column_stats(conn, p, schema)).collect::<Result<Vec<_>>>()?;
        // Which columns each input lacks (they read as their default, or NULL), where that
        // decides what the check expects: with defaults, or counts missing from the manifests.
        let inputs_local: Vec<String> = files.iter().map(|f| strip_file_scheme(f.file_path()).to_string()).collect();
        let present = if has_defaults(schema) || !has_column_counts(&files, schema) {
            Some(field_ids_by_file(conn, &inputs_local)?)
        } else {
            None
        };
        check_non_null_counts(&files, present.as_deref(), &ColumnStats::summed(&stats), &deleted.non_null, schema)?;
        let mut data_files = Vec::new();
        for ((file_path, (rows, bytes)), stats) in file_paths.iter().zip(copied).zip(stats) {
            if rows == 0 {
                data_files.push(None);
                continue;
            }
            let mut builder = DataFileBuilder::default();
            builder
                .content(DataContentType::Data)
                .file_path(file_path.clone())
                .file_format(DataFileFormat::Parquet)
                .partition(first.partition().clone())
                .partition_spec_id(spec_id)
                .record_count(rows)
                .file_size_in_bytes(bytes)
                .column_sizes(stats.sizes)
                .value_counts(stats.values)
                .null_value_counts(stats.nulls)
                .lower_bounds(stats.lower)
                .upper_bounds(stats.upper);
            if let Some(id) = layout.sort_order_id {
                builder.sort_order_id(id);
            }
            data_files.push(Some(
                builder.build().map_err(|e| Error::new(ErrorKind::CorruptMetadata, format!("data file entry: {e}")))?,
            ));
        }
        Ok(data_files)
    })();
    match written {
        Ok(data_files) => {
            // Files without rows are removed; the inputs are replaced all the same.
            let empty = local_paths.iter().zip(&data_files).filter(|(_, f)| f.is_none()).map(|(p, _)| p.as_str());
            crate::store::remove_quietly(empty);
            let mut out: Vec<Written> = local_paths
                .into_iter()
                .zip(data_files)
                .filter(|(_, f)| f.is_some())
                .map(|(local_path, data_file)| Written { local_path, data_file, replaces: Vec::new(), spec_id })
                .collect();
            if out.is_empty() {
                out.push(Written { local_path: String::new(), data_file: None, replaces: Vec::new(), spec_id });
            }
            out[0].replaces = files.iter().map(|f| f.file_path().to_string()).collect();
            Ok(out)
        }
        Err(e) => {
            crate::store::remove_quietly(local_paths.iter().map(String::as_str));
            Err(e)
        }
    }
}

/// The rows, and the non-null values per leaf column (by field id), that a group's deletes
/// remove ([`DeleteSet::deleted_counts_sql`]).
#[derive(Default)]
struct Deleted {
    rows: u64,
    non_null: HashMap<i32, u64>,
}

impl Deleted {
    fn read(conn: &Nested, sql: &str, ids: &[i32]) -> Result<Self> {
        let result = conn.query(sql)?;
        let row = result.first("the count of deleted rows")?;
        let mut non_null = HashMap::new();
        for (k, id) in ids.iter().enumerate() {
            non_null.insert(*id, row[k + 1].int()?.max(0) as u64);
        }
        Ok(Self { rows: row[0].int()?.max(0) as u64, non_null })
    }
}

/// Where a group's output goes: beside its first input when that lies inside the table location
/// or its data path, else where Java's default location provider puts a new data file of the
/// partition: `{data path}/{partition path}` (the data path is `write.data.path`, else
/// `write.folder-storage.path`, else `{location}/data`).
fn output_dir(table: &IcebergTable, first: &IcebergDataFile, spec_id: i32) -> String {
    let location = table.metadata.location().trim_end_matches('/');
    let properties = table.metadata.properties();
    let data_path = ["write.data.path", "write.folder-storage.path"]
        .iter()
        .find_map(|k| properties.get(*k).filter(|v| !v.is_empty()))
        .map(|v| v.trim_end_matches('/').to_string())
        .unwrap_or_else(|| format!("{location}/data"));
    if let Some((dir, _)) = first.file_path().rsplit_once('/')
        && (table::is_inside(dir, location) || dir == data_path || table::is_inside(dir, &data_path))
    {
        return dir.to_string();
    }
    let partition = table.metadata.partition_spec_by_id(spec_id).map_or(String::new(), |spec| {
        let schema = table.metadata.current_schema();
        table::partition::path(spec, schema, first.partition())
    });
    if partition.is_empty() { data_path } else { format!("{data_path}/{partition}") }
}

/// Whether every input file carries Parquet field ids (all or none; a mix is refused).
fn files_have_field_ids(conn: &Nested, inputs: &[String]) -> Result<bool> {
    let list = quote_list(inputs);
    let sql = format!(
        "SELECT count(*) FILTER (WHERE ids > 0), count(*) FROM \
         (SELECT file_name, count(field_id) AS ids FROM parquet_schema({list}) GROUP BY file_name)"
    );
    let result = conn.query(&sql)?;
    let row = result.first("the field-id probe")?;
    let (with_ids, files) = (row[0].int()?, row[1].int()?);
    match with_ids {
        0 => Ok(false),
        n if n == files => Ok(true),
        _ => Err(Error::new(
            ErrorKind::Unsupported,
            "a group mixes Parquet files with and without field ids; nothing was committed",
        )),
    }
}

/// Skips (with the reason, before anything is written; a dry run shows it too) each partition
/// whose files [`select_sql`] would read wrongly: nested fields are read by name inside their
/// top-level column, which is what reading by field id gives only while every nested field a file
/// carries still has its name ([`misread_nested_field`]).
fn skip_misread_nested_fields(
    conn: &Nested,
    schema: &Schema,
    plans: &mut [PartitionPlan],
    sources: &[&IcebergDataFile],
) -> Result<()> {
    if schema.as_struct().fields().iter().all(|f| f.field_type.is_primitive()) {
        return Ok(());
    }
    for p in plans.iter_mut().filter(|p| p.verdict == Verdict::Compact) {
        let inputs: Vec<String> =
            p.groups.iter().flatten().map(|&i| strip_file_scheme(sources[i].file_path()).to_string()).collect();
        if let Some(why) = misread_nested_field(conn, &inputs, schema)? {
            p.skip(&format!("{why}; nested fields are read by name, so its files are not rewritten"));
        }
    }
    Ok(())
}

/// Why `inputs` cannot be read as `schema` by name inside nested columns, if they cannot: a file
/// whose nested field id now has another name (a renamed field), or whose nested field name now
/// belongs to another id (dropped, then re-added under the old name). Lists' and maps' element,
/// key and value fields are named by each writer's convention and are not compared.
fn misread_nested_field(conn: &Nested, inputs: &[String], schema: &Schema) -> Result<Option<String>> {
    let top: HashSet<i32> = schema.as_struct().fields().iter().map(|f| f.id).collect();
    let mut current: HashMap<i32, String> = HashMap::new();
    let mut element_ids: HashSet<i32> = HashSet::new();
    fn walk(ty: &Type, current: &mut HashMap<i32, String>, element_ids: &mut HashSet<i32>) {
        match ty {
            Type::Primitive(_) => {}
            Type::Struct(s) => {
                for f in s.fields() {
                    current.insert(f.id, f.name.clone());
                    walk(&f.field_type, current, element_ids);
                }
            }
            Type::List(l) => {
                element_ids.insert(l.element_field.id);
                walk(&l.element_field.field_type, current, element_ids);
            }
            Type::Map(m) => {
                element_ids.extend([m.key_field.id, m.value_field.id]);
                walk(&m.key_field.field_type, current, element_ids);
                walk(&m.value_field.field_type, current, element_ids);
            }
        }
    }
    for field in schema.as_struct().fields() {
        walk(&field.field_type, &mut current, &mut element_ids);
    }
    if current.is_empty() || inputs.is_empty() {
        return Ok(None);
    }
    let names: HashSet<&str> = current.values().map(String::as_str).collect();
    let list = quote_list(inputs);
    let result = conn.query(&format!(
        "SELECT DISTINCT name, field_id::BIGINT FROM parquet_schema({list}) WHERE field_id IS NOT NULL ORDER BY ALL"
    ))?;
    for row in &result.rows {
        let (Some(name), Ok(id)) = (row[0].text(), row[1].int()) else { continue };
        let id = id as i32;
        if top.contains(&id) || element_ids.contains(&id) {
            continue;
        }
        match current.get(&id) {
            Some(now) if now != name => {
                return Ok(Some(format!("a data file's nested field '{name}' (id {id}) is now named '{now}'")));
            }
            None if names.contains(name) => {
                return Ok(Some(format!(
                    "a data file's nested field '{name}' (id {id}) was dropped and its name reused by another field"
                )));
            }
            _ => {}
        }
    }
    Ok(None)
}

/// Whether every input's manifest entry has value and null counts for every leaf outside lists
/// and maps (the columns [`check_non_null_counts`] compares).
fn has_column_counts(inputs: &[&IcebergDataFile], schema: &Schema) -> bool {
    let ids: Vec<i32> = leaves(schema).into_values().filter(|l| !l.repeated).map(|l| l.id).collect();
    inputs
        .iter()
        .all(|f| ids.iter().all(|id| f.value_counts().contains_key(id) && f.null_value_counts().contains_key(id)))
}

/// Every leaf column outside lists and maps (top-level and struct fields) must hold as many
/// non-null values as its inputs did as a reader sees them: per the manifests' own value and null
/// counts, and for an input that lacks the column (`present`: each input's field ids, when
/// known) its initial-default in every row, or none ([`expected_non_null`]); checked where every
/// input's figure is known. Catches a column read as NULL, a default written as NULL.
fn check_non_null_counts(
    inputs: &[&IcebergDataFile],
    present: Option<&[HashSet<i32>]>,
    stats: &ColumnStats,
    deleted: &HashMap<i32, u64>,
    schema: &Schema,
) -> Result<()> {
    for field in leaves(schema).into_values().filter(|l| !l.repeated) {
        let id = field.id;
        let expected: Option<u64> = inputs
            .iter()
            .enumerate()
            .map(|(k, f)| {
                if let Some(missing) = present.and_then(|p| expected_non_null(schema, id, &p[k], f.record_count())) {
                    return Some(missing);
                }
                Some(f.value_counts().get(&id)?.saturating_sub(*f.null_value_counts().get(&id)?))
            })
            .sum();
        let removed = deleted.get(&id).copied().unwrap_or(0);
        let written = stats.values.get(&id).zip(stats.nulls.get(&id)).map(|(v, n)| v.saturating_sub(*n));
        if let (Some(expected), Some(written)) = (expected, written)
            && expected != written + removed
        {
            return Err(Error::new(
                ErrorKind::CorruptMetadata,
                format!(
                    "rewrite check failed: column '{}' has {written} non-null values and the deletes removed {removed}, \
                     its inputs {expected}; nothing was committed",
                    field.name.replace(", ", ".")
                ),
            ));
        }
    }
    Ok(())
}

#[derive(Default)]
struct ColumnStats {
    sizes: HashMap<i32, u64>,
    values: HashMap<i32, u64>,
    nulls: HashMap<i32, u64>,
    lower: HashMap<i32, Datum>,
    upper: HashMap<i32, Datum>,
}

impl ColumnStats {
    /// The counts of several files added up, for the checks over a whole rewrite (no bounds).
    fn summed(all: &[ColumnStats]) -> ColumnStats {
        let mut out = ColumnStats::default();
        let add = |into: &mut HashMap<i32, u64>, from: &HashMap<i32, u64>| {
            for (id, n) in from {
                *into.entry(*id).or_default() += n;
            }
        };
        for stats in all {
            add(&mut out.sizes, &stats.sizes);
            add(&mut out.values, &stats.values);
            add(&mut out.nulls, &stats.nulls);
        }
        // A count one file lacks is unknown for the whole.
        for map in [&mut out.values, &mut out.nulls] {
            map.retain(|id, _| all.iter().all(|s| s.values.contains_key(id) && s.nulls.contains_key(id)));
        }
        out
    }
}

/// DuckDB truncates string statistics to this many bytes: a maximum that long may be a prefix
/// of the true maximum (too small to be an upper bound); a truncated minimum is still a valid
/// lower bound.
const DUCKDB_STRING_STATS_BYTES: usize = 256;

/// Parses a Parquet statistics value (as DuckDB prints it) into an Iceberg bound. Only types
/// whose printed form is exact get bounds; a wrong bound would make other engines skip rows.
fn bound(ty: &PrimitiveType, text: &str, upper: bool) -> Option<Datum> {
    match ty {
        PrimitiveType::String if upper && text.len() >= DUCKDB_STRING_STATS_BYTES => None,
        PrimitiveType::String => Some(Datum::string(text)),
        PrimitiveType::Int => text.parse::<i32>().ok().map(Datum::int),
        PrimitiveType::Long => text.parse::<i64>().ok().map(Datum::long),
        PrimitiveType::Date => {
            let epoch = chrono::NaiveDate::from_ymd_opt(1970, 1, 1)?;
            let day = chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d").ok()?;
            i32::try_from((day - epoch).num_days()).ok().map(Datum::date)
        }
        PrimitiveType::Timestamp => chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S%.f")
            .ok()
            .map(|t| Datum::timestamp_micros(t.and_utc().timestamp_micros())),
        // DuckDB prints TIMESTAMPTZ statistics in UTC, whatever the session's TimeZone.
        PrimitiveType::Timestamptz => text
            .strip_suffix("+00")
            .and_then(|t| chrono::NaiveDateTime::parse_from_str(t, "%Y-%m-%d %H:%M:%S%.f").ok())
            .map(|t| Datum::timestamptz_micros(t.and_utc().timestamp_micros())),
        PrimitiveType::Time => chrono::NaiveTime::parse_from_str(text, "%H:%M:%S%.f").ok().and_then(|t| {
            use chrono::Timelike;
            let micros = i64::from(t.num_seconds_from_midnight()) * 1_000_000 + i64::from(t.nanosecond() / 1_000);
            Datum::time_micros(micros).ok()
        }),
        PrimitiveType::Boolean => match text {
            "true" => Some(Datum::bool(true)),
            "false" => Some(Datum::bool(false)),
            _ => None,
        },
        PrimitiveType::Float => float_bound::<f32>(text, upper).map(Datum::float),
        PrimitiveType::Double => float_bound::<f64>(text, upper).map(Datum::double),
        PrimitiveType::Decimal { precision, scale } => {
            let mantissa = decimal_mantissa(text, *scale)?;
            let ty = PrimitiveType::Decimal { precision: *precision, scale: *scale };
            Datum::try_from_bytes(&mantissa.to_be_bytes(), ty).ok()
        }
        _ => None,
    }
}

/// A float statistic as an Iceberg bound: never NaN (Iceberg bounds exclude NaN, and DuckDB
/// orders NaN above every number, so a NaN maximum says nothing about the others), and a zero
/// widened to the signed zero that bounds both `-0.0` and `0.0` (Parquet writers may not
/// distinguish them in statistics).
fn float_bound<F>(text: &str, upper: bool) -> Option<F>
where
    F: std::str::FromStr + std::ops::Neg<Output = F> + PartialEq + Default + Copy,
{
    let value: F = text.trim().parse().ok()?;
    #[allow(clippy::eq_op)]
    let is_nan = value != value;
    if is_nan {
        return None;
    }
    let zero = F::default();
    Some(if value == zero { if upper { zero } else { -zero } } else { value })
}

/// The unscaled value of a decimal printed as `-123.45`, at exactly `scale` fractional digits
/// (fewer are padded; more, or anything but digits, give no bound).
fn decimal_mantissa(text: &str, scale: u32) -> Option<i128> {
    let text = text.trim();
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (int_part, frac_part) = digits.split_once('.').unwrap_or((digits, ""));
    let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if int_part.is_empty() || !all_digits(int_part) || !all_digits(frac_part) || frac_part.len() > scale as usize {
        return None;
    }
    let padded = format!("{int_part}{frac_part:0<width$}", width = scale as usize);
    let magnitude: i128 = padded.parse().ok()?;
    Some(if negative { -magnitude } else { magnitude })
}

/// Per-column sizes, value and null counts, and bounds from the written file's footer.
fn column_stats(conn: &Nested, path: &str, schema: &Schema) -> Result<ColumnStats> {
    // Statistics as text, so that every DuckDB version returns the same types.
    let result = conn.query(&format!(
        "SELECT path_in_schema::VARCHAR, stats_min_value::VARCHAR, stats_max_value::VARCHAR, \
         stats_null_count::BIGINT, total_compressed_size::BIGINT, num_values::BIGINT FROM parquet_metadata({})",
        quote_literal(path)
    ))?;
    let mut stats = ColumnStats::default();
    let mut lower_text: HashMap<i32, Vec<Option<String>>> = HashMap::new();
    let mut upper_text: HashMap<i32, Vec<Option<String>>> = HashMap::new();
    // Columns with a row group whose null count is missing: their total is unknown.
    let mut nulls_unknown: HashSet<i32> = HashSet::new();
    let leaves = leaves(schema);
    for row in &result.rows {
        let Some(column) = row[0].text() else { continue };
        let Some(leaf) = leaves.get(column) else { continue };
        let id = leaf.id;
        let nulls = row[3].opt_int()?;
        *stats.sizes.entry(id).or_default() += row[4].opt_int()?.unwrap_or(0).max(0) as u64;
        *stats.values.entry(id).or_default() += row[5].opt_int()?.unwrap_or(0).max(0) as u64;
        match nulls {
            Some(n) => *stats.nulls.entry(id).or_default() += n.max(0) as u64,
            None => {
                nulls_unknown.insert(id);
            }
        }
        lower_text.entry(id).or_default().push(row[1].text().map(str::to_string));
        upper_text.entry(id).or_default().push(row[2].text().map(str::to_string));
    }
    for id in nulls_unknown {
        stats.nulls.remove(&id);
    }
    for field in leaves.values().filter(|l| !l.repeated) {
        let ty = &field.ty;
        let parse_all = |texts: Option<&Vec<Option<String>>>, upper: bool| -> Option<Vec<Datum>> {
            texts?.iter().map(|t| t.as_deref().and_then(|t| bound(ty, t, upper))).collect()
        };
        // Only when every row group has a parseable bound (an all-null row group has none).
        let (lo, hi) = (parse_all(lower_text.get(&field.id), false), parse_all(upper_text.get(&field.id), true));
        if let (Some(lo), Some(hi)) = (lo, hi) {
            let min = lo.into_iter().reduce(|a, b| if b < a { b } else { a });
            let max = hi.into_iter().reduce(|a, b| if b > a { b } else { a });
            if let (Some(min), Some(max)) = (min, max) {
                stats.lower.insert(field.id, min);
                stats.upper.insert(field.id, max);
            }
        }
    }
    Ok(stats)
}

/// The table state a commit is built on.
struct Base {
    located: Located,
    table: IcebergTable,
    manifests: Vec<LoadedManifest>,
    /// A sort order the commit adds, which the new files name ([`IcebergLayout::add`]).
    add_order: Option<iceberg::spec::SortOrder>,
}

/// Commits, retrying on a moved head while the rewrite is still valid there ([`check_rebase`]).
/// New files take `starting_sequence_number`, the data sequence number of the snapshot the
/// rewrite read. Of the delete `candidates`, those dangling on the head committed to
/// ([`dangling_deletes`]) are removed by the same snapshot; they are returned with the commit
/// (its `files` left for the caller to fill).
fn commit_with_retries<'c>(
    mut base: Base,
    starting_sequence_number: i64,
    written: &[Written],
    candidates: &'c [Candidate],
) -> Result<(Committed, Vec<&'c Candidate>)> {
    let replaced: HashSet<&str> = written.iter().flat_map(|w| w.replaces.iter().map(String::as_str)).collect();
    // The new data files are on disk before any metadata names them (each attempt's manifests
    // and list are flushed before its commit).
    sync_files(written.iter().filter(|w| w.data_file.is_some()).map(|w| w.local_path.as_str()))?;
    pause_for_tests();
    for _attempt in 0..MAX_COMMIT_ATTEMPTS {
        interrupt::check("nothing was committed")?;
        let head: Vec<DataFile> = base.manifests.iter().flat_map(|m| base.table.model_files(m)).collect();
        let removed = dangling_deletes(&head, &replaced, candidates);
        let removing: HashSet<&str> = removed.iter().map(|c| c.file.path.as_str()).collect();
        let mut scratch = Vec::new();
        let attempt = (|| {
            let (metadata, snapshot_id) =
                build_snapshot(&base, starting_sequence_number, &replaced, &removing, written, &mut scratch)?;
            sync_files(scratch.iter().map(String::as_str))?;
            Ok::<_, Error>((commit_table(&base.located, &base.table, &metadata)?, snapshot_id))
        })();
        let committed = |id, location, warning| Committed { id, location, files: Vec::new(), warning };
        match attempt {
            Ok((CommitOutcome::Committed { location, warning }, snapshot_id)) => {
                return Ok((committed(snapshot_id, location, warning), removed));
            }
            Ok((CommitOutcome::Unknown(why), snapshot_id)) => {
                let (snapshot_id, location) = settle_unknown(&base.located, snapshot_id, &why)?;
                return Ok((committed(snapshot_id, location, None), removed));
            }
            Ok((CommitOutcome::Conflict, _)) => {
                remove_all(&scratch);
                let located = relocate(&base.located)?;
                let table = IcebergTable::load(&located.metadata_location)?;
                let manifests = table.load_manifests()?;
                base = Base { located, table, manifests, add_order: base.add_order };
                check_rebase(&base, starting_sequence_number, &replaced)?;
            }
            Err(e) => {
                remove_all(&scratch);
                return Err(e);
            }
        }
    }
    Err(Error::conflict(format!(
        "the table kept changing; gave up after {MAX_COMMIT_ATTEMPTS} attempts; nothing was committed and the \
         rewritten files were removed"
    )))
}

/// After a commit whose outcome the catalog did not report (`why`): reloads the table; our
/// snapshot there means it landed. Otherwise nothing is cleaned up — a commit that lands late
/// would reference the files — and the error says so ([`ErrorKind::CommitUnknown`]).
fn settle_unknown(located: &Located, snapshot_id: i64, why: &str) -> Result<(i64, String)> {
    let unknown = |detail: String| {
        Error::new(
            ErrorKind::CommitUnknown,
            format!(
                "the catalog or store did not confirm the commit ({why}) and {detail}; the rewritten files were left in place \
                 (orphan removal deletes them once nothing references them); run again to compact"
            ),
        )
    };
    let fresh = relocate(located).map_err(|e| unknown(format!("the table could not be reloaded: {}", e.message())))?;
    let table = IcebergTable::load(&fresh.metadata_location)
        .map_err(|e| unknown(format!("the table could not be reloaded: {}", e.message())))?;
    if table.metadata.snapshot_by_id(snapshot_id).is_some() {
        return Ok((snapshot_id, fresh.metadata_location));
    }
    Err(unknown("the reloaded table does not show it".into()))
}

/// Whether a rewrite that read the snapshot of `starting_sequence_number` can be committed on
/// `head`: every replaced file must still be live, and no position delete committed since (a
/// data sequence number above the start) may apply to one — its rows would come back, since the
/// new files do not carry the positions it names. Equality deletes committed since are fine: the
/// new files keep the starting sequence number, so they still apply (Java's rule with
/// `use-starting-sequence-number`).
fn check_rebase(head: &Base, starting_sequence_number: i64, replaced: &HashSet<&str>) -> Result<()> {
    let files: Vec<DataFile> = head.manifests.iter().flat_map(|m| head.table.model_files(m)).collect();
    let live: HashMap<&str, &DataFile> = files.iter().map(|f| (f.path.as_str(), f)).collect();
    if let Some(gone) = replaced.iter().find(|p| !live.contains_key(**p)) {
        return Err(Error::conflict(format!(
            "the table changed while compacting and '{gone}' is no longer live; nothing was committed and the \
             rewritten files were removed"
        )));
    }
    let new_position_deletes = files.iter().filter(|f| {
        f.content == table::FileContent::PositionDeletes && f.data_sequence_number > starting_sequence_number
    });
    for delete in new_position_deletes {
        if let Some(target) = replaced.iter().find(|p| delete.applies_to(live[**p])) {
            return Err(Error::conflict(format!(
                "a delete committed while compacting ('{}') can delete rows of '{target}', which this compaction \
                 replaces; nothing was committed and the rewritten files were removed",
                delete.path
            )));
        }
    }
    Ok(())
}

/// Flushes the files a commit will name to disk, before the metadata that names them.
fn sync_files<'a>(paths: impl IntoIterator<Item = &'a str>) -> Result<()> {
    // An object store's PUT is durable once it returns; only local files need flushing.
    for path in paths.into_iter().filter(|p| !crate::store::is_remote(p)) {
        std::fs::File::open(strip_file_scheme(path))?.sync_all()?;
    }
    Ok(())
}

fn remove_all(paths: &[String]) {
    crate::store::remove_quietly(paths.iter().map(String::as_str));
}

/// Writes `loaded` again as a new manifest at `path` for snapshot `snapshot_id`: its live entries
/// in `drop` as DELETED, the others as EXISTING, each with its data and file sequence numbers and
/// the snapshot that added it; `seen` is told of every live entry and whether it was dropped.
async fn rewrite_manifest(
    file_io: &FileIO,
    path: &str,
    snapshot_id: i64,
    version: FormatVersion,
    loaded: &LoadedManifest,
    drop: &HashSet<&str>,
    mut seen: impl FnMut(&iceberg::spec::ManifestEntry, bool),
) -> Result<ManifestFile> {
    let mut writer = manifest_writer(
        file_io,
        path,
        snapshot_id,
        loaded.manifest.metadata().schema().clone(),
        loaded.manifest.metadata().partition_spec().clone(),
        version,
        loaded.file.content,
    )?;
    for e in loaded.manifest.entries().iter().filter(|e| e.is_alive()) {
        let seq = e.sequence_number().unwrap_or(0);
        let file_seq = e.file_sequence_number.or(Some(seq));
        let dropped = drop.contains(e.file_path());
        seen(e, dropped);
        if dropped {
            writer.add_delete_file(e.data_file().clone(), seq, file_seq)?;
        } else {
            let added_by = e.snapshot_id().unwrap_or(loaded.file.added_snapshot_id);
            writer.add_existing_file(e.data_file().clone(), added_by, seq, file_seq)?;
        }
    }
    Ok(writer.write_manifest_file().await?)
}

/// Writes the manifests and manifest list of the replace snapshot on `table` (replacing the
/// `replaced` data files by the `written` ones and removing the `removing` delete files);
/// returns the new metadata. Every file written is recorded in `scratch` for cleanup.
fn build_snapshot(
    base: &Base,
    starting_sequence_number: i64,
    replaced: &HashSet<&str>,
    removing: &HashSet<&str>,
    written: &[Written],
    scratch: &mut Vec<String>,
) -> Result<(TableMetadata, i64)> {
    let (table, manifests) = (&base.table, &base.manifests);
    let metadata = &table.metadata;
    let version = metadata.format_version();
    let file_io = &table.file_io;
    let snapshot_id = new_snapshot_id();
    let metadata_dir = table.metadata_dir();
    let new_manifest_path = |suffix: &str| format!("{metadata_dir}/{}-{suffix}.avro", uuid::Uuid::new_v4());

    let mut new_manifests: Vec<ManifestFile> = Vec::new();
    let mut found = 0usize;
    let (mut deleted_files, mut deleted_records, mut removed_bytes) = (0u64, 0u64, 0u64);
    let (mut total_files, mut total_records, mut total_bytes, mut total_deletes) = (0u64, 0u64, 0u64, 0u64);
    // Removed delete files: (files, deletes in them) per kind.
    let (mut removed_position, mut removed_equality, mut removed_deletes_found) = ((0u64, 0u64), (0u64, 0u64), 0usize);
    runtime::block_on(async {
        // Carry over or rewrite the existing manifests.
        for loaded in manifests {
            let alive: Vec<_> = loaded.manifest.entries().iter().filter(|e| e.is_alive()).collect();
            if loaded.file.content == ManifestContentType::Deletes {
                if !alive.iter().any(|e| removing.contains(e.file_path())) {
                    total_deletes += alive.len() as u64;
                    new_manifests.push(loaded.file.clone());
                    continue;
                }
                let path = new_manifest_path("m2");
                scratch.push(path.clone());
                let file = rewrite_manifest(file_io, &path, snapshot_id, version, loaded, removing, |e, dropped| {
                    if dropped {
                        removed_deletes_found += 1;
                        let slot = match e.content_type() {
                            DataContentType::EqualityDeletes => &mut removed_equality,
                            _ => &mut removed_position,
                        };
                        slot.0 += 1;
                        slot.1 += e.record_count();
                    } else {
                        total_deletes += 1;
                    }
                })
                .await?;
                new_manifests.push(file);
                continue;
            }
            let touched = alive.iter().any(|e| replaced.contains(e.file_path()));
            if !touched {
                for e in &alive {
                    total_files += 1;
                    total_records += e.record_count();
                    total_bytes += e.file_size_in_bytes();
                }
                new_manifests.push(loaded.file.clone());
                continue;
            }
            let path = new_manifest_path("m0");
            scratch.push(path.clone());
            let file = rewrite_manifest(file_io, &path, snapshot_id, version, loaded, replaced, |e, dropped| {
                if dropped {
                    found += 1;
                    deleted_files += 1;
                    deleted_records += e.record_count();
                    removed_bytes += e.file_size_in_bytes();
                } else {
                    total_files += 1;
                    total_records += e.record_count();
                    total_bytes += e.file_size_in_bytes();
                }
            })
            .await?;
            new_manifests.push(file);
        }
        if found != replaced.len() || removed_deletes_found != removing.len() {
            return Err(Error::new(
                ErrorKind::CorruptMetadata,
                format!(
                    "{} of the files to replace or remove are not live in the base snapshot",
                    replaced.len() + removing.len() - found - removed_deletes_found
                ),
            ));
        }
        // One manifest of added files per partition spec.
        let mut by_spec: HashMap<i32, Vec<&Written>> = HashMap::new();
        for w in written.iter().filter(|w| w.data_file.is_some()) {
            by_spec.entry(w.spec_id).or_default().push(w);
        }
        let mut added_manifests = Vec::new();
        let (mut added_records, mut added_bytes) = (0u64, 0u64);
        for (spec_id, files) in by_spec {
            let spec = metadata.partition_spec_by_id(spec_id).ok_or_else(|| {
                Error::new(ErrorKind::CorruptMetadata, format!("partition spec {spec_id} is missing"))
            })?;
            let path = new_manifest_path("m1");
            scratch.push(path.clone());
            let mut writer = manifest_writer(
                file_io,
                &path,
                snapshot_id,
                metadata.current_schema().clone(),
                spec.as_ref().clone(),
                version,
                ManifestContentType::Data,
            )?;
            for file in files.iter().filter_map(|w| w.data_file.as_ref()) {
                added_records += file.record_count();
                added_bytes += file.file_size_in_bytes();
                writer.add_file(file.clone(), starting_sequence_number)?;
            }
            added_manifests.push(writer.write_manifest_file().await?);
        }
        let added_files = written.iter().filter(|w| w.data_file.is_some()).count();
        total_files += added_files as u64;
        total_records += added_records;
        total_bytes += added_bytes;

        let list_path =
            write_manifest_list(table, snapshot_id, added_manifests.into_iter().chain(new_manifests), scratch).await?;

        let mut properties = HashMap::from([
            ("added-data-files".to_string(), added_files.to_string()),
            ("deleted-data-files".to_string(), deleted_files.to_string()),
            ("added-records".to_string(), added_records.to_string()),
            ("deleted-records".to_string(), deleted_records.to_string()),
            ("added-files-size".to_string(), added_bytes.to_string()),
            ("removed-files-size".to_string(), removed_bytes.to_string()),
            ("total-data-files".to_string(), total_files.to_string()),
            ("total-records".to_string(), total_records.to_string()),
            ("total-files-size".to_string(), total_bytes.to_string()),
            ("total-delete-files".to_string(), total_deletes.to_string()),
            ("engine-name".to_string(), "lakehouse".to_string()),
        ]);
        if !removing.is_empty() {
            properties.extend([
                ("removed-delete-files".to_string(), (removed_position.0 + removed_equality.0).to_string()),
                ("removed-position-delete-files".to_string(), removed_position.0.to_string()),
                ("removed-equality-delete-files".to_string(), removed_equality.0.to_string()),
                ("removed-position-deletes".to_string(), removed_position.1.to_string()),
                ("removed-equality-deletes".to_string(), removed_equality.1.to_string()),
            ]);
        }
        let summary = Summary { operation: Operation::Replace, additional_properties: properties };
        let next = with_main_snapshot(table, snapshot_id, list_path, summary, base.add_order.as_ref())?;
        if let Some(order) = &base.add_order {
            crate::action::layout::check_added(&next, order)?;
        }
        Ok((next, snapshot_id))
    })?
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dec(mantissa: i128, precision: u32, scale: u32) -> Datum {
        Datum::try_from_bytes(&mantissa.to_be_bytes(), PrimitiveType::Decimal { precision, scale }).unwrap()
    }

    #[test]
    fn bounds_only_from_exact_statistics() {
        let long = "z".repeat(DUCKDB_STRING_STATS_BYTES);
        let cases: Vec<(PrimitiveType, &str, bool, Option<Datum>)> = vec![
            (PrimitiveType::Long, "-42", false, Some(Datum::long(-42))),
            (PrimitiveType::Int, "7", true, Some(Datum::int(7))),
            (PrimitiveType::Date, "1970-01-02", false, Some(Datum::date(1))),
            (PrimitiveType::Timestamp, "1970-01-01 00:00:01.5", true, Some(Datum::timestamp_micros(1_500_000))),
            (PrimitiveType::String, "abc", true, Some(Datum::string("abc"))),
            (PrimitiveType::String, &long, false, Some(Datum::string(&long))),
            (PrimitiveType::String, &long, true, None),
            (PrimitiveType::Double, "1.5", false, Some(Datum::double(1.5))),
            (PrimitiveType::Double, "nan", true, None),
            (PrimitiveType::Float, "0.1", true, Some(Datum::float(0.1f32))),
            (PrimitiveType::Float, "-inf", false, Some(Datum::float(f32::NEG_INFINITY))),
            (PrimitiveType::Decimal { precision: 10, scale: 2 }, "-123.45", false, Some(dec(-12345, 10, 2))),
            (PrimitiveType::Decimal { precision: 10, scale: 2 }, "7.5", true, Some(dec(750, 10, 2))),
            (PrimitiveType::Decimal { precision: 38, scale: 0 }, "-7", true, Some(dec(-7, 38, 0))),
            (PrimitiveType::Decimal { precision: 10, scale: 2 }, "7.505", true, None),
            (PrimitiveType::Decimal { precision: 10, scale: 0 }, "1e5", true, None),
            (PrimitiveType::Long, "not a number", false, None),
            (PrimitiveType::Timestamptz, "1970-01-01 00:00:01.5+00", true, Some(Datum::timestamptz_micros(1_500_000))),
            (PrimitiveType::Timestamptz, "1970-01-01 00:00:01.5+02", true, None),
            (PrimitiveType::Time, "01:00:00.25", false, Some(Datum::time_micros(3_600_250_000).unwrap())),
            (PrimitiveType::Boolean, "false", false, Some(Datum::bool(false))),
            (PrimitiveType::Boolean, "1", true, None),
            (PrimitiveType::Uuid, "5b846203-5359-4983-a277-d9fb77c1ba0a", true, None),
        ];
        for (ty, text, upper, want) in cases {
            assert_eq!(bound(&ty, text, upper), want, "{ty:?} {text:.10} upper={upper}");
        }
    }

    #[test]
    fn dangling_deletes_are_those_no_live_file_needs() {
        let data =
            |seq: i64| DataFile { data_sequence_number: seq, ..DataFile::for_tests("a=1", 1, FileContent::Data) };
        let (old, kept_old, newer) = (data(1), data(1), data(5));
        let equality =
            DataFile { data_sequence_number: 3, ..DataFile::for_tests("a=1", 1, FileContent::EqualityDeletes) };
        let position =
            DataFile { data_sequence_number: 3, ..DataFile::for_tests("a=1", 1, FileContent::PositionDeletes) };
        let candidate = |file: &DataFile, targets: Option<Vec<&DataFile>>| Candidate {
            file: file.clone(),
            targets: targets.map(|t| t.iter().map(|f| location_key(&f.path)).collect()),
            partitions: HashSet::new(),
        };
        let removed = |head: &[DataFile], replaced: &[&DataFile], candidates: &[Candidate]| -> Vec<String> {
            let replaced: HashSet<&str> = replaced.iter().map(|f| f.path.as_str()).collect();
            dangling_deletes(head, &replaced, candidates).into_iter().map(|c| c.file.path.clone()).collect()
        };
        let head = vec![old.clone(), kept_old.clone(), newer.clone(), equality.clone(), position.clone()];
        // The equality delete still applies to `kept_old` (seq 1 < 3), not to `newer` (5).
        let eq = [candidate(&equality, None)];
        assert!(removed(&head, &[&old], &eq).is_empty());
        assert_eq!(removed(&head, &[&old, &kept_old], &eq), vec![equality.path.clone()]);
        // The position delete names `old` only: dangling once `old` is replaced, whatever else lives.
        let pos = [candidate(&position, Some(vec![&old]))];
        assert_eq!(removed(&head, &[&old], &pos), vec![position.path.clone()]);
        let pos_both = [candidate(&position, Some(vec![&old, &kept_old]))];
        assert!(removed(&head, &[&old], &pos_both).is_empty());
        // Unknown targets: any live file of its scope and sequence range keeps it.
        assert!(removed(&head, &[&old], &[candidate(&position, None)]).is_empty());
        // A candidate no longer live on the head is not removed again.
        let without: Vec<DataFile> = head.iter().filter(|f| f.path != equality.path).cloned().collect();
        assert!(removed(&without, &[&old, &kept_old], &eq).is_empty());
    }

    #[test]
    fn zero_bounds_cover_both_signed_zeros() {
        assert!(float_bound::<f64>("0.0", false).unwrap().is_sign_negative());
        assert!(float_bound::<f64>("-0.0", true).unwrap().is_sign_positive());
        assert!(float_bound::<f32>("0", false).unwrap().is_sign_negative());
        assert_eq!(float_bound::<f64>("-2.5", false), Some(-2.5));
    }

    #[test]
    fn select_reads_by_field_id_only_when_files_have_ids() {
        let schema = Schema::builder()
            .with_fields(vec![
                NestedField::optional(1, "id", Type::Primitive(PrimitiveType::Long)).into(),
                NestedField::optional(2, "it's", Type::Primitive(PrimitiveType::String)).into(),
            ])
            .build()
            .unwrap();
        let by_id = select_sql(&schema, &["/d/a.parquet".into()], true).unwrap();
        assert!(by_id.contains("schema = MAP {1: {name: 'id', type: 'BIGINT'"), "{by_id}");
        assert!(by_id.contains("\"it's\"") && by_id.contains("'it''s'"), "{by_id}");
        let by_name = OrderedRows {
            select: select_sql(&schema, &["/d/a.parquet".into()], false).unwrap(),
            order: vec!["\"id\" DESC NULLS LAST".into()],
        }
        .sql();
        assert!(
            by_name.contains("union_by_name = true") && by_name.ends_with("ORDER BY \"id\" DESC NULLS LAST"),
            "{by_name}"
        );
    }
}
