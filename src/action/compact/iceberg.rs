//! An Iceberg table's part in a compaction (`IcebergRewrite`): the current snapshot's live
//! files, rewritten by field id with the delete files that apply to them applied, checked (rows,
//! non-null counts) before the commit ([`super::iceberg_commit`]).

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::path::Path;

use ::iceberg::spec::{
    DataContentType, DataFile as IcebergDataFile, DataFileBuilder, DataFileFormat, FormatVersion, ManifestContentType,
    PrimitiveType, Transform, Type,
};

use super::deletes::{DeleteSet, DeletedCounts, Input};
use super::deletion_vectors::DeletedPositions;
use super::iceberg_commit::{Base, Candidate, Start, Written, commit_with_retries};
use super::iceberg_focus::Focus;
use super::iceberg_nested_defaults::NestedDefaults;
use super::iceberg_nested_fields::skip_misread_nested_fields;
use super::iceberg_outputs::{Outputs, Target};
use super::run::{Committed, Rewrite, copy_in_order};
use super::sql::{LINEAGE_COLUMNS, duckdb_type, field_ids, files_have_field_ids, leaves, select_sql};
use super::stats::{ColumnStats, check_non_null_counts, column_stats, has_column_counts};
use super::stitch::{Footers, Requirements};
use crate::action::compact::defaults::{
    field_ids_by_file, has_defaults, skip_missing_identity_columns, skip_unwritable_defaults,
};
use crate::action::layout::{IcebergLayout, OrderedRows, iceberg_layout};
use crate::duck::{Nested, quote_files, quote_ident, quote_literal};
use crate::error::{Error, ErrorKind, Result};
use crate::plan::compaction::{PartitionPlan, Verdict};
use crate::plan::layout::{Layout, LayoutOptions, is_recent};
use crate::profile::{PartitionProfile, Thresholds};
use crate::store::{TableRoot, duckdb_path, location_key};
use crate::table::iceberg::commit::require_exclusive;
use crate::table::iceberg::deletion_vector::is_deletion_vector;
use crate::table::iceberg::{CarriedManifest, IcebergTable, LoadedManifest};
use crate::table::{DataFile, FileContent, Located, PartitionKey};

/// An Iceberg table's part in a compaction: the current snapshot's live files, rewritten by
/// field id with the delete files that apply to them applied, committed as one `replace`
/// snapshot that also removes the delete files left dangling ([`commit_with_retries`]).
pub(super) struct IcebergRewrite<'a> {
    located: &'a Located,
    table: &'a IcebergTable,
    manifests: Vec<LoadedManifest>,
    /// Manifests left undecoded: they hold files only of [`IcebergRewrite::settled`] partitions.
    carried: Vec<CarriedManifest>,
    /// Partitions profiled by the lean reader alone, needing no compaction ([`super::iceberg_focus`]).
    settled: Vec<PartitionProfile>,
    files: Vec<DataFile>,
    /// For each model file: its manifest and entry.
    sources: Vec<(usize, usize)>,
    starting_sequence_number: i64,
    /// Model indices of the live delete files.
    delete_files: Vec<usize>,
    /// For position delete files read by a rewrite: the data file paths they name.
    named_paths: RefCell<HashMap<usize, HashSet<String>>>,
    /// The order rows are written in, and the sort order id the files carry.
    layout: IcebergLayout,
    /// Format v3: rewritten rows keep their `_row_id` and `_last_updated_sequence_number`.
    lineage: bool,
    /// Deleted-row files of deletion vectors whose SQL was handed out (the calibration's), kept
    /// until the rewrite is dropped.
    vectors: RefCell<Vec<DeletedPositions>>,
    /// The inputs' footers, for stitching ([`super::stitch`]).
    footers: Footers,
    /// What stitched inputs must be: with field ids, the current schema's columns, and the
    /// table's codec when it names one.
    stitching: Requirements,
    /// Where written files go ([`Outputs`]), under the table's root whatever the metadata says.
    outputs: Outputs,
}

impl<'a> IcebergRewrite<'a> {
    /// The rewrite of `table`'s current snapshot. With `focus` (the profile's thresholds) only
    /// the manifests holding files of partitions that may need compaction are decoded
    /// ([`super::iceberg_focus`]); without, every one.
    pub(super) fn new(
        located: &'a Located,
        table: &'a IcebergTable,
        layout: &LayoutOptions,
        focus: Option<&Thresholds>,
    ) -> Result<Self> {
        let layout = iceberg_layout(layout, &table.metadata)?;
        let Focus { manifests, carried, settled } = match focus {
            Some(thresholds) => super::iceberg_focus::focus(table, thresholds)?,
            None => Focus::whole(table)?,
        };
        let unread: HashSet<&PartitionKey> = settled.iter().map(|p| &p.key).collect();
        let (mut files, mut sources) = (Vec::new(), Vec::new());
        for (m, loaded) in manifests.iter().enumerate() {
            let model = table.model_files(loaded);
            let alive = loaded.manifest.entries().iter().enumerate().filter(|(_, e)| e.is_alive()).map(|(i, _)| i);
            for (file, entry) in model.into_iter().zip(alive) {
                // A settled partition's files in a decoded manifest are not all its files.
                if !unread.contains(&file.key) {
                    files.push(file);
                    sources.push((m, entry));
                }
            }
        }
        // Every file this rewrite may read is on the table's store, before any is read.
        let root = located.root()?;
        root.check_reads(files.iter().map(|f| f.path.as_str()))?;
        let outputs = Outputs::of(table, root);
        let starting_sequence_number = table.metadata.current_snapshot().map_or(0, |s| s.sequence_number());
        let delete_files: Vec<usize> = (0..files.len()).filter(|&i| files[i].content != FileContent::Data).collect();
        require_one_vector_per_file(&manifests, &sources, &delete_files)?;
        Ok(Self {
            located,
            table,
            manifests,
            carried,
            settled,
            files,
            sources,
            starting_sequence_number,
            delete_files,
            named_paths: RefCell::new(HashMap::new()),
            layout,
            lineage: table.metadata.format_version() >= FormatVersion::V3,
            vectors: RefCell::new(Vec::new()),
            footers: Footers::default(),
            stitching: Requirements {
                field_ids: true,
                codec: configured_codec(table),
                leaf_paths: Some(leaves(table.metadata.current_schema()).into_keys().collect()),
                top_level: None,
                small_row_groups: false,
                variant_columns: Default::default(),
            },
            outputs,
        })
    }

    /// The time partitions (year, month, day, hour transforms; identity on a date, as days)
    /// ending after `now - window` ([`crate::table::iceberg::partition::time_range`]).
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
                let Some(::iceberg::spec::Literal::Primitive(value)) = value else { return false };
                crate::table::iceberg::partition::time_range_micros(transform, value)
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

    /// The group's inputs and deletes, with their data sequence numbers (and the inputs' first
    /// row ids).
    fn inputs(&self, group: &[usize]) -> (Vec<Input<'_>>, Vec<Input<'_>>) {
        let input = |i: usize| Input {
            file: self.source(i),
            sequence_number: self.files[i].data_sequence_number,
            first_row_id: self.source(i).first_row_id(),
        };
        (group.iter().map(|&i| input(i)).collect(), self.deletes_for(group).into_iter().map(input).collect())
    }

    /// The rows the deletion vectors of `group` delete, read and checked (no vector deletes a
    /// row past its file's record count); `None` when none applies.
    fn vectors_for(&self, group: &[usize]) -> Result<Option<DeletedPositions>> {
        let vectors: Vec<usize> =
            self.deletes_for(group).into_iter().filter(|&d| is_deletion_vector(self.source(d))).collect();
        if vectors.is_empty() {
            return Ok(None);
        }
        let file_io = &self.table.file_io;
        let read = crate::runtime::block_on(async {
            let mut read = Vec::with_capacity(vectors.len());
            for &d in &vectors {
                read.push(crate::table::iceberg::deletion_vector::read(file_io, self.source(d)).await?);
            }
            Ok::<_, Error>(read)
        })??;
        let mut rows = Vec::with_capacity(vectors.len());
        for (&d, deleted) in vectors.iter().zip(read) {
            let Some(&data) = group.iter().find(|&&i| self.files[d].applies_to(&self.files[i])) else { continue };
            let path = duckdb_path(&self.files[data].path).to_string();
            deleted.check_within(self.files[data].record_count, &path)?;
            rows.push((path, deleted));
        }
        DeletedPositions::from_rows(rows)
    }

    /// Why the deletes that apply to `group` cannot be applied by the rewrite, if they cannot.
    fn unappliable_deletes(&self, group: &[usize]) -> Option<String> {
        let schema = self.table.metadata.current_schema();
        let deletes = self.deletes_for(group);
        let not_parquet =
            deletes.iter().filter(|&&d| !self.files[d].parquet && !is_deletion_vector(self.source(d))).count();
        if not_parquet > 0 {
            return Some(format!("{not_parquet} of its delete files are ORC or Avro, which compaction does not apply"));
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
        let local: Vec<String> = wanted.iter().map(|&d| duckdb_path(&self.files[d].path).to_string()).collect();
        let list = quote_files(&local);
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

impl Rewrite for IcebergRewrite<'_> {
    type Written = Written;
    const APPLIES_DELETES: bool = true;
    const PURGES: bool = true;
    const DEFAULT_DELETE_RATIO: f64 = crate::plan::compaction::ICEBERG_DELETE_RATIO_THRESHOLD;

    fn files(&self) -> &[DataFile] {
        &self.files
    }

    fn settled(&self) -> &[PartitionProfile] {
        &self.settled
    }

    fn root(&self) -> &TableRoot {
        &self.outputs.root
    }

    fn notice(&self) -> Option<String> {
        self.outputs.notice.clone()
    }

    fn layout(&self) -> Layout {
        self.layout.layout.clone()
    }

    fn recent(&self, now: i64, window: i64) -> Vec<PartitionKey> {
        self.recent_partitions(now, window)
    }

    fn copy_sql(&self, conn: &Nested, group: &[usize], target: &str) -> Result<String> {
        let (inputs, deletes) = self.inputs(group);
        let vectors = self.vectors_for(group)?;
        let reads = Reads { inputs: &inputs, deletes: &deletes, vectors: vectors.as_ref(), lineage: self.lineage };
        let sql = copy_sql(conn, self.table, &reads, target, &self.layout)?.0;
        self.vectors.borrow_mut().extend(vectors);
        Ok(sql)
    }

    fn stitch_refusal(&self, _conn: &Nested, group: &[usize]) -> Option<String> {
        if self.lineage {
            return Some(
                "format v3 rows keep row ids that derive from their file, which stitching would change".into(),
            );
        }
        if !self.deletes_for(group).is_empty() {
            return Some("delete files apply to its rows".into());
        }
        if let Some(&i) = group.iter().find(|&&i| !self.files[i].parquet) {
            return Some(format!("'{}' is not Parquet", self.files[i].path));
        }
        let local: Vec<String> = group.iter().map(|&i| duckdb_path(self.source(i).file_path()).to_string()).collect();
        self.footers.refusal(&local, &self.stitching)
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
            p.groups.iter().flatten().map(|&i| duckdb_path(sources[i].file_path()).to_string()).collect()
        };
        skip_unwritable_defaults(conn, schema, plans, &input_paths)?;
        let local = |i: usize| duckdb_path(sources[i].file_path()).to_string();
        skip_missing_identity_columns(conn, &self.table.metadata, plans, &sources, &local)
    }

    fn check_commit(&self) -> Result<()> {
        require_exclusive(self.located)
    }

    /// A format v3 table with data files that have no `first_row_id` yet (upgraded from v2, its
    /// old manifests not yet given ids): the first commit gives every such manifest its ids, so a
    /// later batch, read before, would write its rows without them and they would get fresh ids.
    fn one_commit(&self) -> Option<&'static str> {
        let unassigned = (0..self.files.len())
            .any(|i| self.files[i].content == FileContent::Data && self.source(i).first_row_id().is_none());
        (self.lineage && unassigned).then_some("the table's rows get their format v3 row ids from its first v3 commit")
    }

    fn rewrite(
        &self,
        conn: &Nested,
        plan: &PartitionPlan,
        group: &[usize],
        outputs: usize,
        stitch: bool,
    ) -> Result<Vec<Written>> {
        let (inputs, deletes) = self.inputs(group);
        let vectors = self.vectors_for(group)?;
        let reads = Reads { inputs: &inputs, deletes: &deletes, vectors: vectors.as_ref(), lineage: self.lineage };
        let stitch = stitch.then_some(&self.footers);
        let target = Target { dir: self.outputs.dir(self.table, inputs[0].file, plan.spec_id), files: outputs };
        let written = rewrite_group(conn, self.table, &reads, plan.spec_id, &self.layout, target, stitch)?;
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

    fn commit(&self, written: &[Written], moved: bool) -> Result<Committed> {
        let base = Base {
            located: self.located.clone(),
            table: self.table.clone(),
            manifests: self.manifests.clone(),
            carried: self.carried.clone(),
            add_order: self.layout.add.clone(),
        };
        let replaced: HashSet<&str> = written.iter().flat_map(|w| w.replaces.iter().map(String::as_str)).collect();
        let candidates = self.removal_candidates(&replaced);
        let start = Start {
            snapshot_id: self.table.metadata.current_snapshot().map(|s| s.snapshot_id()),
            sequence_number: self.starting_sequence_number,
            first_row_ids: (0..self.files.len())
                .filter(|&i| replaced.contains(self.files[i].path.as_str()))
                .map(|i| (self.files[i].path.clone(), self.source(i).first_row_id()))
                .collect(),
        };
        let (outcome, removed) = commit_with_retries(base, moved, &start, written, &candidates)?;
        let mut by_partition: HashMap<PartitionKey, u64> = HashMap::new();
        for c in removed {
            for key in &c.partitions {
                *by_partition.entry(key.clone()).or_default() += 1;
            }
        }
        Ok(Committed { deletes_removed: by_partition, ..outcome })
    }
}

/// The `SELECT` of the live data files `paths` of `table` with the delete files that apply to
/// them applied ([`DeleteSet`]), as the current schema's columns; `None` when no delete applies.
/// What the gate's measured scan reads, so that it reads the rows a reader of the table sees;
/// the deleted rows of deletion vectors it reads must be kept as long as the query runs.
pub(crate) fn merge_on_read_select(
    conn: &Nested,
    located: &Located,
    table: &IcebergTable,
    paths: &[String],
) -> Result<Option<(String, Option<DeletedPositions>)>> {
    // Without delete manifests no delete applies: the manifests need no decoding.
    if !table.current_manifests()?.iter().any(|m| m.content == ManifestContentType::Deletes) {
        return Ok(None);
    }
    let rewrite = IcebergRewrite::new(located, table, &LayoutOptions::default(), None)?;
    let wanted: HashSet<&str> = paths.iter().map(String::as_str).collect();
    let group: Vec<usize> = (0..rewrite.files.len())
        .filter(|&i| rewrite.files[i].content == FileContent::Data && wanted.contains(rewrite.files[i].path.as_str()))
        .collect();
    let (inputs, deletes) = rewrite.inputs(&group);
    if deletes.is_empty() || inputs.is_empty() {
        return Ok(None);
    }
    let schema = table.metadata.current_schema();
    let local: Vec<String> = inputs.iter().map(|i| duckdb_path(i.file.file_path()).to_string()).collect();
    let ids = files_have_field_ids(conn, &local)?;
    let vectors = rewrite.vectors_for(&group)?;
    let sql = DeleteSet::new(conn, schema, &inputs, &deletes, vectors.as_ref(), ids, false)?.select_sql(schema);
    Ok(Some((sql, vectors)))
}

/// What a rewrite reads: data files, the delete files and deletion vectors that apply to them,
/// and whether rows keep their lineage (format v3).
struct Reads<'r, 'a> {
    inputs: &'r [Input<'a>],
    deletes: &'r [Input<'a>],
    vectors: Option<&'r DeletedPositions>,
    lineage: bool,
}

/// Refuses a table with two live deletion vectors for one data file: the spec allows one, and
/// applying either alone could bring deleted rows back.
fn require_one_vector_per_file(
    manifests: &[LoadedManifest],
    sources: &[(usize, usize)],
    delete_files: &[usize],
) -> Result<()> {
    let mut seen: HashSet<String> = HashSet::new();
    for &d in delete_files {
        let (m, e) = sources[d];
        let file = manifests[m].manifest.entries()[e].data_file();
        if !is_deletion_vector(file) {
            continue;
        }
        let Some(target) = file.referenced_data_file() else { continue };
        if !seen.insert(target.clone()) {
            return Err(Error::new(
                ErrorKind::CorruptMetadata,
                format!(
                    "data file '{target}' has two live deletion vectors (the spec allows one); the table is corrupt \
                     and nothing was rewritten"
                ),
            ));
        }
    }
    Ok(())
}

/// The codec `write.parquet.compression-codec` names, as [`super::stitch::codec_name`] gives it
/// (`None`: not set, any codec will do).
fn configured_codec(table: &IcebergTable) -> Option<&'static str> {
    table.metadata.properties().get("write.parquet.compression-codec")?;
    Some(match compression(table) {
        "lz4" => "lz4_raw",
        other => other,
    })
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
    reads: &Reads<'_, '_>,
    target: &str,
    layout: &IcebergLayout,
) -> Result<(String, Option<DeletedCounts>)> {
    let (rows, deleted) = rewrite_select(conn, table, reads, layout)?;
    Ok((format!("COPY ({}) TO {} {}", rows.sql(), quote_literal(target), copy_options(table, reads.lineage)), deleted))
}

/// The `SELECT` of [`copy_sql`] in the layout's order, and its deleted-counts query.
fn rewrite_select(
    conn: &Nested,
    table: &IcebergTable,
    reads: &Reads<'_, '_>,
    layout: &IcebergLayout,
) -> Result<(OrderedRows, Option<DeletedCounts>)> {
    let (inputs, deletes) = (reads.inputs, reads.deletes);
    let schema = table.metadata.current_schema();
    let local_inputs: Vec<String> = inputs.iter().map(|f| duckdb_path(f.file.file_path()).to_string()).collect();
    // With the manifests' value/null counts on every input, the non-null check after the rewrite
    // catches any file read the wrong way, so one footer decides; otherwise every footer does.
    let files: Vec<&IcebergDataFile> = inputs.iter().map(|i| i.file).collect();
    let probe = if has_column_counts(&files, schema) { &local_inputs[..1] } else { &local_inputs[..] };
    let files_have_ids = files_have_field_ids(conn, probe)?;
    let (select, deleted) = if deletes.is_empty() && !reads.lineage {
        let fills = if files_have_ids {
            NestedDefaults::probe(conn, schema, &local_inputs)?
        } else {
            NestedDefaults::default()
        };
        (select_sql(schema, &local_inputs, files_have_ids, &fills)?, None)
    } else {
        let set = DeleteSet::new(conn, schema, inputs, deletes, reads.vectors, files_have_ids, reads.lineage)?;
        (set.select_sql(schema), set.deleted_counts_sql())
    };
    Ok((layout.order.rows(conn, select)?, deleted))
}

/// The `COPY` options of a rewrite: Parquet with the table's codec and the current schema's
/// field ids (and with `lineage` the reserved ones of the lineage columns), returning the file's
/// statistics.
fn copy_options(table: &IcebergTable, lineage: bool) -> String {
    let mut ids: Vec<String> = table
        .metadata
        .current_schema()
        .as_struct()
        .fields()
        .iter()
        .map(|f| format!("{}: {}", quote_ident(&f.name), field_ids(f)))
        .collect();
    if lineage {
        ids.extend(LINEAGE_COLUMNS.iter().map(|(name, id)| format!("{}: {id}", quote_ident(name))));
    }
    format!("(FORMAT parquet, COMPRESSION {}, FIELD_IDS {{{}}}, RETURN_STATS)", compression(table), ids.join(", "))
}

/// Rewrites one group into `target.files` files (in layout order, [`copy_in_order`]) in
/// `target.dir` (beside its first input when under the table's root, [`Outputs::dir`]), with `deletes` applied, or with `stitch` into one file of its row groups
/// ([`super::stitch`]); checks the rows and per-column non-null counts written, plus those deleted,
/// against the manifests. A file that gets no row (every row deleted) is not added; the first
/// written carries the replaced inputs.
fn rewrite_group(
    conn: &Nested,
    table: &IcebergTable,
    reads: &Reads<'_, '_>,
    spec_id: i32,
    layout: &IcebergLayout,
    target: Target,
    stitch: Option<&Footers>,
) -> Result<Vec<Written>> {
    let inputs = reads.inputs;
    let first = inputs[0].file;
    let Target { dir, files: outputs } = target;
    let file_paths: Vec<String> =
        (0..outputs.max(1)).map(|_| format!("{dir}/{}-compacted.parquet", uuid::Uuid::new_v4())).collect();
    let local_paths: Vec<String> = file_paths.iter().map(|p| duckdb_path(p).to_string()).collect();
    crate::store::create_parent_dir(&file_paths[0])?;
    if inputs.iter().any(|f| f.file.partition() != first.partition()) {
        return Err(Error::new(
            ErrorKind::CorruptMetadata,
            "a rewrite group mixes partitions; nothing was committed (this is a bug, please report it)",
        ));
    }
    let files: Vec<&IcebergDataFile> = inputs.iter().map(|i| i.file).collect();
    let inputs_local: Vec<String> = files.iter().map(|f| duckdb_path(f.file_path()).to_string()).collect();
    let written = (|| {
        let (copied, deleted) = match stitch {
            Some(footers) => (footers.stitch_into(&inputs_local, &local_paths)?, Deleted::default()),
            None => copy_group(conn, table, reads, layout, &local_paths)?,
        };
        let stats = check_written(conn, table, &files, &inputs_local, &local_paths, &copied, &deleted)?;
        let entry = |((file_path, (rows, bytes)), stats): ((&String, (u64, u64)), ColumnStats)| {
            if rows == 0 {
                return Ok(None);
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
            let built = builder.build();
            built.map(Some).map_err(|e| Error::new(ErrorKind::CorruptMetadata, format!("data file entry: {e}")))
        };
        file_paths.iter().zip(copied).zip(stats).map(entry).collect::<Result<Vec<_>>>()
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

/// Copies a group's rows, its deletes applied, in layout order into `local_paths`
/// ([`copy_in_order`]); returns (rows, bytes) per file and what the deletes removed, counted by
/// a query of its own before the rewrite.
fn copy_group(
    conn: &Nested,
    table: &IcebergTable,
    reads: &Reads<'_, '_>,
    layout: &IcebergLayout,
    local_paths: &[String],
) -> Result<(Vec<(u64, u64)>, Deleted)> {
    let (rows_in_order, deleted_sql) = rewrite_select(conn, table, reads, layout)?;
    let deleted = match &deleted_sql {
        None => Deleted::default(),
        Some((sql, ids)) => Deleted::read(conn, sql, ids)?,
    };
    let options = copy_options(table, reads.lineage);
    let copied = copy_in_order(conn, &rows_in_order, local_paths, &|select, target| {
        format!("COPY ({select}) TO {} {options}", quote_literal(target))
    })?;
    Ok((copied, deleted))
}

/// Checks what a group's rewrite wrote (`copied` into `local_paths`) against the manifests'
/// figures of its input `files` (read at `inputs_local`): the rows and per-column non-null
/// counts written, plus those `deleted`; returns the column statistics of each file written.
fn check_written(
    conn: &Nested,
    table: &IcebergTable,
    files: &[&IcebergDataFile],
    inputs_local: &[String],
    local_paths: &[String],
    copied: &[(u64, u64)],
    deleted: &Deleted,
) -> Result<Vec<ColumnStats>> {
    let schema = table.metadata.current_schema();
    let rows: u64 = copied.iter().map(|(rows, _)| rows).sum();
    let listed: u64 = files.iter().map(|f| f.record_count()).sum();
    if rows + deleted.rows != listed {
        return Err(Error::new(
            ErrorKind::CorruptMetadata,
            format!(
                "rewrite of {} files produced {rows} rows and the deletes removed {}, the manifests list {listed}; \
                 nothing was committed",
                files.len(),
                deleted.rows
            ),
        ));
    }
    let stats = local_paths.iter().map(|p| column_stats(conn, p, schema)).collect::<Result<Vec<_>>>()?;
    // Which columns each input lacks (they read as their default, or NULL), where that
    // decides what the check expects: with defaults, or counts missing from the manifests.
    let present = if has_defaults(schema) || !has_column_counts(files, schema) {
        Some(field_ids_by_file(conn, inputs_local)?)
    } else {
        None
    };
    check_non_null_counts(files, present.as_deref(), &ColumnStats::summed(&stats), &deleted.non_null, schema)?;
    Ok(stats)
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
