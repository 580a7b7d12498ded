//! Compaction of a Delta Lake table: the shared planner picks the groups, DuckDB rewrites each
//! group into one file in its partition's directory, and one `OPTIMIZE` commit (delta-rs's
//! `CommitBuilder`) removes the inputs and adds the outputs, all with `dataChange: false`, as
//! Spark's and delta-rs's OPTIMIZE commit.
//!
//! Safety rules, as for Iceberg ([`crate::action::compact`]):
//! - the protocol is checked first: every table feature has a decision (`FEATURES`); one whose
//!   meaning a rewrite could break (catalog-managed commits,
//!   UniForm's conversion to Iceberg, anything unknown) is refused, naming it and why
//!   ([`check_protocol`]); a table with a variant column is stitched only, never re-encoded
//!   (DuckDB would decode and re-encode the variants; shredded files only where the table
//!   enables shredding; no variant stats), its other partitions skipped naming the column
//!   ([`Rewrite::stitch_only`]); column mapping, row tracking, type widening, clustering, in-commit
//!   timestamps, materialized partition columns, collations and v2 checkpoints are rewritten
//!   as they ask
//!   ([`crate::action::compact::delta_columns`]; a z-order on the clustering columns; no
//!   checkpoint written on a v2-checkpoint table; commits pinned to one version where their
//!   actions depend on it);
//! - deletion vectors are applied: each is read and checked (version, size, magic, CRC,
//!   cardinality, no row past its file's `numRecords`), and the rewrite's query leaves out the
//!   rows it deletes ([`crate::action::compact::deletion_vectors`]); the `remove` of a file
//!   carries its vector's descriptor, the new `add` has none. A file whose vector deletes at
//!   least `delete_ratio_threshold` of its rows is rewritten even alone (purged);
//! - every output holds exactly its inputs' rows less the deleted ones (checked before the
//!   commit against `numRecords` less the vectors' cardinality); files are written
//!   without the partition columns (their values live in the log) unless the table asks for
//!   them (`materializePartitionColumns`, or the hint `delta.writePartitionColumnsToParquet`:
//!   then after the data columns, with the partition's value from the log), with `stats`
//!   (numRecords, nullCount, min/max where exact; none for partition columns) so readers keep
//!   skipping files;
//! - the commit ([`crate::action::compact::delta_commit`]) is put-if-absent on
//!   `_delta_log/<v>.json`; a concurrent commit is settled as Spark settles one for OPTIMIZE,
//!   and a failed commit removes everything we wrote.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use deltalake_core::kernel::Add;
use serde_json::{Value, json};

use crate::action::compact::deletion_vectors::DeletedPositions;
use crate::action::compact::delta_columns::{DataColumn, DeltaColumns, materialized_partition_refusal};
use crate::action::compact::delta_commit::Written;
use crate::action::compact::run::copy_in_order;
use crate::action::compact::run::{Committed, Rewrite};
use crate::action::compact::stats::DUCKDB_STRING_STATS_BYTES;
use crate::action::compact::stitch::{Footers, Requirements};
use crate::action::layout::{RowOrder, resolve_names};
use crate::duck::{Nested, quote_file, quote_literal};
use crate::error::{Error, ErrorKind, Result};
use crate::interrupt;
use crate::plan::compaction::{CompactionOptions, PartitionPlan};
use crate::plan::layout::Layout;
use crate::store::TableRoot;
use crate::store::table_root::relative_inside;
use crate::table::delta::{DeltaLakeTable, LiveFile};
use crate::table::{DataFile, FileContent, PartitionKey};

/// Every table feature, and what compaction does with it: `None`, rewritten (kept valid by a
/// rewrite of the same rows: the files are read and written as the feature asks); `Some(why)`,
/// refused for that reason. A feature not listed is refused as unknown. docs/delta.md's feature
/// table says the same.
const FEATURES: &[(&str, Option<&str>)] = &[
    ("appendOnly", None),
    ("invariants", None),
    ("checkConstraints", None),
    ("generatedColumns", None),
    ("changeDataFeed", None),
    ("identityColumns", None),
    ("timestampNtz", None),
    ("deletionVectors", None),
    ("vacuumProtocolCheck", None),
    ("columnMapping", None),
    ("typeWidening", None),
    ("typeWidening-preview", None),
    ("v2Checkpoint", None),
    ("allowColumnDefaults", None),
    ("checkpointProtection", None),
    ("domainMetadata", None),
    ("rowTracking", None),
    ("clustering", None),
    ("inCommitTimestamp", None),
    // Files written as the compatibility asks ([`iceberg_compat_refusal`]): field ids, nested
    // ones included; partition values in the files; `numRecords`; no deletion vector written.
    ("icebergCompatV1", None),
    ("icebergCompatV2", None),
    (
        "icebergCompatV3",
        Some("its files must carry the row-lineage field ids Iceberg v3 reads, which this rewrite does not write"),
    ),
    ("icebergWriterCompatV1", Some("it constrains physical names and field ids in ways this rewrite does not check")),
    // Variant columns are stitched only, never re-encoded (`DeltaRewrite::stitch_only`):
    // their `metadata`/`value`/`typed_value` bytes and the group's annotation are copied.
    ("variantType", None),
    ("variantType-preview", None),
    ("variantShredding", None),
    ("variantShredding-preview", None),
    ("materializePartitionColumns", None),
    ("collations", None),
    ("collations-preview", None),
    ("catalogManaged", Some("its commits go through its catalog, which this version does not call")),
    ("catalogOwned-preview", Some("its commits go through its catalog, which this version does not call")),
];

/// Refuses a table whose protocol this rewrite could break, naming the feature and why
/// ([`protocol_refusal`]).
pub fn check_protocol(table: &DeltaLakeTable) -> Result<()> {
    match protocol_refusal(table) {
        None => Ok(()),
        Some(what) => Err(Error::new(
            ErrorKind::Unsupported,
            format!("Delta table '{}' {what}; compaction does not rewrite it", table.root.display()),
        )),
    }
}

/// What in the table's protocol or schema this rewrite could break, and why (`uses feature
/// 'variantType': …`), or `None` when compaction may rewrite it: the one decision
/// [`check_protocol`] refuses by and the read-only functions report (`compaction_blocked_by`).
pub fn protocol_refusal(table: &DeltaLakeTable) -> Option<String> {
    if table.converts_to_iceberg() {
        return Some(
            "converts every commit to Iceberg metadata (UniForm: delta.universalFormat.enabledFormats = iceberg), \
             which Delta's converter writes and registers in the table's Hive metastore; a rewrite without it would \
             leave the Iceberg view on the replaced files until a VACUUM deletes them"
                .into(),
        );
    }
    if let Some(why) = iceberg_compat_refusal(table) {
        return Some(why);
    }
    for key in ["readerFeatures", "writerFeatures"] {
        for feature in table.features(key) {
            if let Some((_, Some(why))) = FEATURES.iter().find(|(name, _)| *name == feature) {
                return Some(format!("uses feature '{feature}': {why}"));
            }
        }
    }
    let known: Vec<&str> = FEATURES.iter().map(|(name, _)| *name).collect();
    if let Some(what) = table.unknown_protocol(&known, &known) {
        return Some(format!("{what} (not known to this version)"));
    }
    if table.features("writerFeatures").iter().any(|f| f == "rowTracking") && table.row_tracking.is_none() {
        return Some(
            "supports row tracking but names no materialized row-id columns \
             (delta.rowTracking.materializedRowIdColumnName), so rewritten rows could not keep their ids"
                .into(),
        );
    }
    let mapping = table.property("delta.columnMapping.mode").unwrap_or("none");
    if !matches!(mapping, "none" | "name" | "id") {
        return Some(format!("uses column mapping mode '{mapping}', which Delta does not define"));
    }
    materialized_partition_refusal(table)
}

/// Why a table under an Iceberg compatibility feature (`icebergCompatV1`/`V2`, whose files
/// Iceberg readers must be able to read once UniForm converts the log) cannot be rewritten as it
/// requires, or `None`: column mapping (which the feature requires) is written with every field
/// id, element, key and value ids included (`delta.columnMapping.nested.ids`), and the partition
/// columns are materialized after the data columns, as for `materializePartitionColumns`
/// ([`crate::action::compact::delta_columns`]).
fn iceberg_compat_refusal(table: &DeltaLakeTable) -> Option<String> {
    let features = table.features("writerFeatures");
    let compat = features.iter().find(|f| matches!(f.as_str(), "icebergCompatV1" | "icebergCompatV2"))?;
    if table.property("delta.columnMapping.mode").is_none_or(|m| m == "none") {
        return Some(format!("uses feature '{compat}' without column mapping, which the feature requires"));
    }
    None
}

/// The layout of a clustered table's rewrite: a z-order on its clustering columns (by logical
/// name), what Spark's OPTIMIZE clusters by; a layout the user asks for is refused, as Spark
/// refuses ZORDER BY on a clustered table.
fn clustered_layout(
    table: &DeltaLakeTable,
    columns: &DeltaColumns,
    clustering: &[Vec<String>],
    options: &CompactionOptions,
) -> Result<Layout> {
    let refuse = |why: String| {
        Err(Error::new(ErrorKind::Unsupported, format!("Delta table '{}' is clustered: {why}", table.root.display())))
    };
    if options.layout.strategy.is_some() || options.layout.sort_order.is_some() {
        return refuse(
            "its files are laid out by its clustering columns, so strategy and sort_order cannot be given (as Spark \
             refuses ZORDER BY on it)"
                .into(),
        );
    }
    let mut logical = Vec::new();
    for path in clustering {
        let column = match path.as_slice() {
            [name] => columns.data.iter().find(|c| &c.name == name).map(|c| c.logical.clone()),
            _ => None,
        };
        match column {
            Some(column) => logical.push(column),
            None => {
                return refuse(format!("its clustering column '{}' is not a top-level data column", path.join(".")));
            }
        }
    }
    if logical.is_empty() {
        return Ok(Layout::Binpack);
    }
    Ok(Layout::Zorder(logical))
}

/// A Delta table's part in a compaction ([`crate::action::compact::run`]): the current
/// version's live files, rewritten by column name, committed as one OPTIMIZE commit.
pub(crate) struct DeltaRewrite<'a> {
    table: &'a DeltaLakeTable,
    /// The table's directory, which every file read must be on the store of and every output under.
    root: TableRoot,
    files: Vec<DataFile>,
    /// For each model data file: its live file (deletion-vector entries have none).
    live: Vec<Option<usize>>,
    columns: DeltaColumns,
    target_size: i64,
    /// What the rewrite's order is (Delta tables have no sort order of their own: binpack
    /// unless `sort_order` is given).
    layout: Layout,
    /// The inputs' footers, for stitching ([`super::stitch`]).
    footers: Footers,
    /// What stitched inputs must be: the table's data columns, with field ids under column
    /// mapping.
    stitching: Requirements,
    /// Why the table is stitched only (a variant column), if it is.
    stitch_only: Option<String>,
    /// Whether the table enables variant shredding ([`shredding_enabled`]); when it does not, a
    /// new file may hold no shredded variant under its variant columns
    /// (`stitching.variant_columns`).
    shredding: bool,
}

impl<'a> DeltaRewrite<'a> {
    /// Checks the protocol ([`check_protocol`]) and reads what the planner needs.
    pub(crate) fn new(table: &'a DeltaLakeTable, options: &CompactionOptions) -> Result<Self> {
        check_protocol(table)?;
        let files = table.model_files();
        // Every file this rewrite may read is on the table's store, before any is read.
        let root = table.table_root()?;
        root.check_reads(files.iter().map(|f| f.path.as_str()))?;
        let index: HashMap<&std::ffi::OsStr, usize> =
            table.files.iter().enumerate().map(|(i, f)| (f.local_path.as_os_str(), i)).collect();
        let live = files
            .iter()
            .map(|f| {
                (f.content == FileContent::Data).then(|| index.get(std::ffi::OsStr::new(&f.path)).copied()).flatten()
            })
            .collect();
        let mut columns = DeltaColumns::of(table)?;
        let layout = match &table.clustering {
            None => options.layout.resolve(&[])?,
            Some(clustering) => clustered_layout(table, &columns, clustering, options)?,
        };
        let layout = resolve_names(layout, &columns.sortable())?;
        let order = RowOrder::of(&columns.in_files(&layout), |n| columns.type_of(n));
        columns.order = order;
        let variants: HashSet<String> = variant_columns(&columns).map(|c| c.name.clone()).collect();
        let stitch_only = variant_columns(&columns).next().map(|c| &c.logical).map(|name| {
            format!(
                "column '{name}' is a variant, whose bytes only row-group stitching keeps (DuckDB would decode and \
                 re-encode them)"
            )
        });
        let stitching = Requirements {
            field_ids: columns.is_mapped(),
            // The codec the table asks for, when it names one.
            codec: table.property("delta.parquet.compression.codec").map(|_| columns.compression),
            leaf_paths: None,
            top_level: Some(columns.data.iter().map(|c| c.name.clone()).collect()),
            // Small row groups are kept rather than the table left uncompacted; a variant's parts
            // carry no field id under column mapping (Spark writes none: they are read by name).
            small_row_groups: stitch_only.is_some(),
            variant_columns: variants,
        };
        Ok(Self {
            table,
            root,
            files,
            live,
            columns,
            target_size: (options.target_file_size_mb * crate::profile::MIB) as i64,
            layout,
            footers: Footers::default(),
            stitching,
            stitch_only,
            shredding: shredding_enabled(table),
        })
    }

    /// The adds of a clustered table say so (`clusteringProvider`), as Spark's OPTIMIZE writes
    /// them: their rows are z-ordered on the clustering columns.
    fn clustering_provider(&self) -> Option<String> {
        self.table.clustering.as_ref().map(|_| "liquid".to_string())
    }

    /// Why the local file `path` may not be copied into a new file of this table: it holds a
    /// shredded variant (a `typed_value` under a variant column) and the table does not enable
    /// shredding, so that new files must hold unshredded variants (PROTOCOL.md, "Variant
    /// Shredding"). A struct field of that name beside a variant is refused too: never wrongly
    /// allowed.
    fn shredded_refusal(&self, path: &str) -> Option<String> {
        if self.shredding || self.stitching.variant_columns.is_empty() {
            return None;
        }
        let leaves = match self.footers.leaf_paths(path) {
            Ok(leaves) => leaves,
            Err(e) => return Some(e.to_string()),
        };
        let shredded = leaves.iter().find(|parts| {
            parts.first().is_some_and(|top| self.stitching.variant_columns.contains(top))
                && parts.iter().any(|p| p == "typed_value")
        })?;
        Some(format!(
            "'{path}' holds a shredded variant ('{}'), and the table does not enable variant shredding \
             (delta.enableVariantShredding), so a new file may not",
            shredded.join(".")
        ))
    }

    /// Refuses a re-encoding of a table that is stitched only ([`Rewrite::stitch_only`]; the
    /// flow skips its partitions that are not stitched, so this is a second guard).
    fn refuse_reencoding(&self) -> Result<()> {
        match &self.stitch_only {
            None => Ok(()),
            Some(why) => Err(Error::new(ErrorKind::Unsupported, format!("{why}; nothing was written"))),
        }
    }

    /// The live files of the planned files `group`.
    fn inputs(&self, group: &[usize]) -> Result<Vec<&LiveFile>> {
        group
            .iter()
            .map(|&i| {
                self.live[i].map(|l| &self.table.files[l]).ok_or_else(|| {
                    Error::new(ErrorKind::CorruptMetadata, "a planned file is not a live data file (this is a bug)")
                })
            })
            .collect()
    }
}

impl Rewrite for DeltaRewrite<'_> {
    type Written = Written;
    const DELETES: &'static str = "deletion vectors";
    const APPLIES_DELETES: bool = true;
    const PURGES: bool = true;

    fn files(&self) -> &[DataFile] {
        &self.files
    }

    fn root(&self) -> &TableRoot {
        &self.root
    }

    fn layout(&self) -> Layout {
        self.layout.clone()
    }

    fn copy_sql(&self, conn: &Nested, group: &[usize], target: &str) -> Result<String> {
        self.refuse_reencoding()?;
        self.columns.copy_sql(conn, &self.inputs(group)?, target)
    }

    fn stitch_only(&self) -> Option<String> {
        self.stitch_only.clone()
    }

    fn stitch_refusal(&self, conn: &Nested, group: &[usize]) -> Option<String> {
        if self.columns.row_tracking.is_some() {
            return Some("the table tracks row ids, which derive from a row's file and a stitched file changes".into());
        }
        if !self.columns.materialized.is_empty() {
            return Some(
                "new files must hold the partition columns (materializePartitionColumns), which older files may lack"
                    .into(),
            );
        }
        if let Some(c) = self.columns.data.iter().find(|c| c.widened) {
            return Some(format!(
                "column '{}' was widened (typeWidening), and a stitched file keeps its inputs' narrower types",
                c.logical
            ));
        }
        let inputs = match self.inputs(group) {
            Ok(inputs) => inputs,
            Err(e) => return Some(e.to_string()),
        };
        if let Some(f) = inputs.iter().find(|f| f.deletion_vector_rows.is_some()) {
            return Some(format!("'{}' has a deletion vector", f.path));
        }
        let local = local_inputs(&inputs);
        if let Some(why) = self.footers.refusal(&local, &self.stitching) {
            return Some(why);
        }
        // The inputs share one schema (the refusal checked it): the first file tells.
        if let Some(why) = self.shredded_refusal(&local[0]) {
            return Some(why);
        }
        // Under column mapping every mapped field must be in the file by its id, as a rewrite's;
        // the inputs share one schema (the refusal checked it), so the first file tells.
        self.columns.check_written_ids(conn, &local[0]).err().map(|e| e.to_string())
    }

    fn rewrite(
        &self,
        conn: &Nested,
        plan: &PartitionPlan,
        group: &[usize],
        outputs: usize,
        stitch: bool,
    ) -> Result<Vec<Written>> {
        if !stitch {
            self.refuse_reencoding()?;
        }
        let stitch = stitch.then_some(&self.footers);
        let mut written = rewrite_group(conn, self.table, &self.columns, &self.inputs(group)?, outputs, stitch)?;
        for w in &mut written {
            w.key = Some(plan.key.clone());
            w.add.clustering_provider = self.clustering_provider();
        }
        Ok(written)
    }

    fn local_path(written: &Written) -> &Path {
        &written.local_path
    }

    fn output(written: &Written) -> Option<String> {
        Some(written.local_path.to_string_lossy().into_owned())
    }

    fn commit(&self, written: &[Written], moved: bool) -> Result<Committed> {
        crate::store::sync_local(written.iter().filter_map(|w| w.local_path.to_str()))?;
        // On object storage the next _delta_log entry is created by a conditional put; a store
        // that ignored the condition could overwrite a concurrent writer's commit.
        let log_dir = self.table.log_dir().to_string_lossy().into_owned();
        if crate::store::local_path(&log_dir).is_none() {
            crate::runtime::block_on(crate::store::require_conditional_writes(&log_dir))??;
        }
        interrupt::pause_for_tests();
        interrupt::check("nothing was committed")?;
        let (version, warning) =
            crate::action::compact::delta_commit::commit(self.table, self.target_size, written, moved)?;
        let location = self.table.log_dir().join(format!("{version:020}.json")).to_string_lossy().into_owned();
        let mut deletes_removed: HashMap<PartitionKey, u64> = HashMap::new();
        for w in written {
            let vectors = w.replaces.iter().filter(|r| r.deletion_vector.is_some()).count() as u64;
            if let (Some(key), 1..) = (&w.key, vectors) {
                *deletes_removed.entry(key.clone()).or_default() += vectors;
            }
        }
        Ok(Committed { id: version, location, warning, deletes_removed })
    }
}

/// Whether the table enables variant shredding: `variantShredding` (or its preview name) in
/// both feature lists and `delta.enableVariantShredding` `true` (PROTOCOL.md, "Variant
/// Shredding").
fn shredding_enabled(table: &DeltaLakeTable) -> bool {
    let listed =
        |key: &str| table.features(key).iter().any(|f| f == "variantShredding" || f == "variantShredding-preview");
    listed("readerFeatures")
        && listed("writerFeatures")
        && table.property("delta.enableVariantShredding") == Some("true")
}

/// The data columns whose type is or holds a variant (in a struct, array or map).
fn variant_columns(columns: &DeltaColumns) -> impl Iterator<Item = &DataColumn> {
    columns.data.iter().filter(|c| holds_variant(&c.delta))
}

/// Whether the Delta type `ty` (as the schema writes it) is or holds a variant.
fn holds_variant(ty: &Value) -> bool {
    match ty {
        Value::String(name) => name == "variant",
        Value::Object(fields) => fields.iter().any(|(key, value)| {
            matches!(key.as_str(), "type" | "elementType" | "keyType" | "valueType" | "fields") && holds_variant(value)
        }),
        Value::Array(items) => items.iter().any(holds_variant),
        _ => false,
    }
}

/// The local paths of `inputs`, as stitching reads them.
fn local_inputs(inputs: &[&LiveFile]) -> Vec<String> {
    inputs.iter().map(|f| f.local_path.to_string_lossy().into_owned()).collect()
}

/// Rewrites one group into `outputs` new files (in layout order, [`copy_in_order`]), or with
/// `stitch` into one file of its row groups ([`super::stitch`]), in the partition directory of its
/// first input; the first written carries the removes.
fn rewrite_group(
    conn: &Nested,
    table: &DeltaLakeTable,
    columns: &DeltaColumns,
    inputs: &[&LiveFile],
    outputs: usize,
    stitch: Option<&Footers>,
) -> Result<Vec<Written>> {
    if inputs.iter().any(|f| f.partition_values != inputs[0].partition_values) {
        return Err(Error::new(
            ErrorKind::CorruptMetadata,
            "a rewrite group mixes partitions; nothing was committed (this is a bug, please report it)",
        ));
    }
    let (relatives, local_paths) = output_paths(table, columns, inputs, outputs, stitch)?;
    let targets: Vec<String> = local_paths.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    if columns.row_tracking.is_some()
        && let Some(f) =
            inputs.iter().find(|f| f.remove.base_row_id.is_none() || f.remove.default_row_commit_version.is_none())
    {
        return Err(Error::new(
            ErrorKind::CorruptMetadata,
            format!(
                "'{}' has no baseRowId or defaultRowCommitVersion although the table tracks row ids, so its rows' ids \
                 cannot be kept; nothing was committed",
                f.path
            ),
        ));
    }
    // Held until the rewrite is done: the query reads its temporary file.
    let deleted = DeletedPositions::of(&table.root, inputs)?;
    let done = (|| {
        let copied = match stitch {
            Some(footers) => footers.stitch_into(&local_inputs(inputs), &targets)?,
            None => {
                let select = columns.ordered_select(conn, inputs, deleted.as_ref())?;
                copy_in_order(conn, &select, &targets, &|select, target| columns.copy_to(select, target))?
            }
        };
        let rows: u64 = copied.iter().map(|(rows, _)| rows).sum();
        // Every vector's rows were checked to lie within its file's numRecords.
        let purged = deleted.as_ref().map_or(0, |d| d.rows);
        let expected: Option<u64> = inputs.iter().map(|f| f.num_records).sum::<Option<u64>>().map(|n| n - purged);
        if let Some(expected) = expected
            && rows != expected
        {
            return Err(Error::new(
                ErrorKind::CorruptMetadata,
                format!(
                    "rewrite of {} files produced {rows} rows, their stats say {expected} ({purged} deleted by deletion \
                     vectors); nothing was committed",
                    inputs.len()
                ),
            ));
        }
        let (adds, null_counts) = adds_of(conn, columns, inputs, &relatives, &local_paths, copied)?;
        check_null_counts(inputs, &null_counts, columns, purged > 0)?;
        Ok(adds)
    })();
    match done {
        Ok(adds) => {
            // A file that got no row (fewer rows than files) is not added, unless every one is
            // empty: then the first carries the removes, as a single-file rewrite of empty inputs
            // always did.
            let any_rows = adds.iter().any(|(rows, _)| *rows > 0);
            let mut out: Vec<Written> = Vec::new();
            let mut dropped: Vec<String> = Vec::new();
            for (i, (local_path, (rows, add))) in local_paths.into_iter().zip(adds).enumerate() {
                if rows > 0 || (!any_rows && i == 0) {
                    out.push(Written { local_path, add, rows, replaces: Vec::new(), key: None });
                } else {
                    dropped.push(local_path.to_string_lossy().into_owned());
                }
            }
            crate::store::remove_quietly(dropped.iter().map(String::as_str));
            out[0].replaces = inputs.iter().map(|f| f.remove.clone()).collect();
            Ok(out)
        }
        Err(e) => {
            crate::store::remove_quietly(targets.iter().map(String::as_str));
            Err(e)
        }
    }
}

/// The paths of a group's `outputs` new files (at least one), relative to the table's root and
/// local, in the partition directory of its first input (at the root when that is outside the
/// table), named after the codec its chunks use; the directory is created.
fn output_paths(
    table: &DeltaLakeTable,
    columns: &DeltaColumns,
    inputs: &[&LiveFile],
    outputs: usize,
    stitch: Option<&Footers>,
) -> Result<(Vec<PathBuf>, Vec<PathBuf>)> {
    let first_dir = Path::new(&inputs[0].path).parent().map(Path::to_path_buf).unwrap_or_default();
    // Relative inside the table, `..` resolved (an absolute path names a shallow clone's source,
    // a path whose `..` climb out of the table another directory: write at the root instead).
    let relative_dir = relative_inside(&first_dir).unwrap_or_default();
    // Named after the codec its chunks use, as Spark names its files (a stitched file keeps its
    // inputs' codec).
    let codec = stitch.and_then(|f| f.codec(&inputs[0].local_path.to_string_lossy())).unwrap_or(columns.compression);
    let relatives: Vec<PathBuf> = (0..outputs.max(1))
        .map(|_| relative_dir.join(format!("part-00000-{}-c000.{codec}.parquet", uuid::Uuid::new_v4())))
        .collect();
    let local_paths: Vec<PathBuf> = relatives.iter().map(|r| table.root.join(r)).collect();
    let root = table.table_root()?;
    if let Some(outside) = local_paths.iter().find(|p| !root.contains(&p.to_string_lossy())) {
        return Err(Error::new(
            ErrorKind::CorruptMetadata,
            format!("'{}' is not under the table's root; nothing was written", outside.display()),
        ));
    }
    crate::store::create_parent_dir(&local_paths[0].to_string_lossy())?;
    Ok((relatives, local_paths))
}

/// The `add` actions of the files written (`copied`: rows and bytes each), with their rows, each
/// file's field ids and row ids checked; and the null counts per column summed over them (`None`
/// when a file's stats lack one).
type Adds = (Vec<(u64, Add)>, HashMap<String, Option<u64>>);

/// Checks each file written and builds its `add` action ([`Adds`]).
fn adds_of(
    conn: &Nested,
    columns: &DeltaColumns,
    inputs: &[&LiveFile],
    relatives: &[PathBuf],
    local_paths: &[PathBuf],
    copied: Vec<(u64, u64)>,
) -> Result<Adds> {
    let mut adds = Vec::new();
    let mut null_counts: HashMap<String, Option<u64>> = HashMap::new();
    for ((relative, local_path), (rows, bytes)) in relatives.iter().zip(local_paths).zip(copied) {
        columns.check_written_ids(conn, &local_path.to_string_lossy())?;
        check_row_ids_written(conn, local_path, columns)?;
        let stats = file_stats(conn, local_path, columns, rows)?;
        for c in &columns.data {
            let n = stats["nullCount"].get(&c.name).and_then(Value::as_u64);
            let total = null_counts.entry(c.name.clone()).or_insert(Some(0));
            *total = total.zip(n).map(|(a, b)| a + b);
        }
        adds.push((
            rows,
            Add {
                path: relative.to_string_lossy().into_owned(),
                partition_values: inputs[0].partition_values.clone(),
                size: bytes as i64,
                modification_time: chrono::Utc::now().timestamp_millis(),
                data_change: false,
                stats: Some(stats.to_string()),
                tags: None,
                deletion_vector: None,
                base_row_id: None,
                default_row_commit_version: None,
                clustering_provider: None,
            },
        ));
    }
    Ok((adds, null_counts))
}

/// Under row tracking: every row of a written file has its id and commit version materialized
/// (a NULL would make a reader derive an id from the new file's baseRowId: a new id).
fn check_row_ids_written(conn: &Nested, path: &Path, columns: &DeltaColumns) -> Result<()> {
    let Some((id, version)) = &columns.row_tracking else { return Ok(()) };
    let nulls = conn.query(&format!(
        "SELECT path_in_schema::VARCHAR, sum(stats_null_count)::BIGINT FROM parquet_metadata({}) \
         WHERE path_in_schema IN ({}, {}) GROUP BY ALL",
        quote_file(&path.to_string_lossy()),
        quote_literal(id),
        quote_literal(version)
    ))?;
    let counted: HashMap<String, Option<i64>> =
        nulls.rows.iter().filter_map(|r| Some((r[0].text()?.to_string(), r[1].opt_int().ok()?))).collect();
    for column in [id, version] {
        if counted.get(column.as_str()).copied().flatten() != Some(0) {
            return Err(Error::new(
                ErrorKind::CorruptMetadata,
                format!("rewrite check failed: '{column}' is not set on every row written; nothing was committed"),
            ));
        }
    }
    Ok(())
}

/// Every data column whose inputs all carry a null count must keep it (a column read as NULL,
/// e.g. by a wrong name, would not). Inputs' counts come from their own stats, which count the
/// rows deletion vectors delete too: with `purged` rows the written count may only be lower.
fn check_null_counts(
    inputs: &[&LiveFile],
    written_counts: &HashMap<String, Option<u64>>,
    columns: &DeltaColumns,
    purged: bool,
) -> Result<()> {
    for DataColumn { name, .. } in &columns.data {
        let expected: Option<u64> = inputs.iter().map(|f| f.null_counts.get(name).copied()).sum();
        let written = written_counts.get(name).copied().flatten();
        if let (Some(expected), Some(written)) = (expected, written)
            && (written > expected || (!purged && expected != written))
        {
            return Err(Error::new(
                ErrorKind::CorruptMetadata,
                format!(
                    "rewrite check failed: column '{name}' has {written} nulls, its inputs {expected}; nothing was committed"
                ),
            ));
        }
    }
    Ok(())
}

/// The `stats` of a written file, from its footer: `numRecords`, `nullCount` of every
/// top-level primitive column, and `minValues`/`maxValues` where DuckDB's statistics are exact
/// and Delta's JSON form is unambiguous (integers, floats without NaN, dates, strings DuckDB did
/// not truncate, timestamps widened to whole milliseconds, as Delta's stats keep milliseconds).
///
/// Strings are bounded in UTF-8 byte order (DuckDB's), the order the collations RFC gives plain
/// `minValues`/`maxValues` whatever a column's collation; collation-aware bounds
/// (`statsWithCollation`) are never written, as they must be computed with the exact collation
/// version to be used.
fn file_stats(conn: &Nested, path: &Path, columns: &DeltaColumns, rows: u64) -> Result<Value> {
    let result = conn.query(&format!(
        "SELECT path_in_schema::VARCHAR, stats_min_value::VARCHAR, stats_max_value::VARCHAR, \
         stats_null_count::BIGINT FROM parquet_metadata({})",
        quote_file(&path.to_string_lossy())
    ))?;
    let types: HashMap<&str, &Value> = columns.data.iter().map(|c| (c.name.as_str(), &c.delta)).collect();
    let mut nulls: HashMap<String, Option<u64>> = HashMap::new();
    let mut mins: HashMap<String, Vec<Option<String>>> = HashMap::new();
    let mut maxs: HashMap<String, Vec<Option<String>>> = HashMap::new();
    for row in &result.rows {
        let Some(column) = row[0].text() else { continue };
        if !types.get(column).is_some_and(|t| t.is_string()) {
            continue; // nested: no statistics
        }
        let n = row[3].opt_int()?;
        let slot = nulls.entry(column.to_string()).or_insert(Some(0));
        *slot = match (*slot, n) {
            (Some(total), Some(n)) => Some(total + n.max(0) as u64),
            _ => None,
        };
        mins.entry(column.to_string()).or_default().push(row[1].text().map(str::to_string));
        maxs.entry(column.to_string()).or_default().push(row[2].text().map(str::to_string));
    }
    let mut null_count = serde_json::Map::new();
    let (mut min_values, mut max_values) = (serde_json::Map::new(), serde_json::Map::new());
    for (name, count) in &nulls {
        let Some(count) = count else { continue };
        null_count.insert(name.clone(), json!(count));
        if !columns.indexed.contains(name) || *count == rows {
            continue;
        }
        let ty = types[name.as_str()].as_str().unwrap_or_default();
        let parse = |texts: &Vec<Option<String>>, upper: bool| -> Option<Vec<(Value, f64)>> {
            texts.iter().map(|t| t.as_deref().and_then(|t| stat_value(ty, t, upper))).collect()
        };
        if let (Some(lo), Some(hi)) = (parse(&mins[name], false), parse(&maxs[name], true))
            && let (Some(lo), Some(hi)) = (
                lo.into_iter().min_by(|a, b| a.1.total_cmp(&b.1).then_with(|| cmp_json(&a.0, &b.0))),
                hi.into_iter().max_by(|a, b| a.1.total_cmp(&b.1).then_with(|| cmp_json(&a.0, &b.0))),
            )
        {
            min_values.insert(name.clone(), lo.0);
            max_values.insert(name.clone(), hi.0);
        }
    }
    Ok(json!({"numRecords": rows, "minValues": min_values, "maxValues": max_values, "nullCount": null_count}))
}

/// Orders strings (the only non-numeric bounds) by their text; numbers tie on the sort key.
fn cmp_json(a: &Value, b: &Value) -> std::cmp::Ordering {
    a.as_str().unwrap_or_default().cmp(b.as_str().unwrap_or_default())
}

/// A statistic as Delta's stats JSON writes it, with a numeric sort key (0 for strings, which
/// order by text); `None` when not exact enough to be a bound.
fn stat_value(ty: &str, text: &str, upper: bool) -> Option<(Value, f64)> {
    match ty {
        "long" | "integer" | "short" | "byte" => text.parse::<i64>().ok().map(|v| (json!(v), v as f64)),
        "float" | "double" => {
            let v: f64 = text.trim().parse().ok()?;
            if v.is_nan() || v.is_infinite() {
                return None;
            }
            // -0.0 and 0.0 compare equal; bound both.
            let v = if v == 0.0 { if upper { 0.0 } else { -0.0 } } else { v };
            Some((json!(v), v))
        }
        "date" => {
            let day = chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d").ok()?;
            Some((json!(text), day.and_hms_opt(0, 0, 0)?.and_utc().timestamp() as f64))
        }
        "string" if upper && text.len() >= DUCKDB_STRING_STATS_BYTES => None,
        "string" => Some((json!(text), 0.0)),
        "timestamp" | "timestamp_ntz" => {
            let naive = match ty {
                "timestamp" => text.strip_suffix("+00")?,
                _ => text,
            };
            let t = chrono::NaiveDateTime::parse_from_str(naive, "%Y-%m-%d %H:%M:%S%.f").ok()?.and_utc();
            let micros = t.timestamp_micros();
            // Delta keeps milliseconds: the minimum rounds down, the maximum up.
            let millis = if upper {
                micros.div_euclid(1000) + i64::from(micros.rem_euclid(1000) != 0)
            } else {
                micros.div_euclid(1000)
            };
            let t = chrono::DateTime::from_timestamp_millis(millis)?;
            let text = match ty {
                "timestamp" => t.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string(),
                _ => t.naive_utc().format("%Y-%m-%dT%H:%M:%S%.3f").to_string(),
            };
            Some((json!(text), millis as f64))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variants_are_found_at_any_depth_and_not_in_names_or_metadata() {
        assert!(holds_variant(&json!("variant")));
        let nested = json!({"type": "struct", "fields": [{"name": "x", "type": {"type": "map", "keyType": "string",
            "valueType": {"type": "array", "elementType": "variant", "containsNull": true}}, "metadata": {}}]});
        assert!(holds_variant(&nested));
        let named = json!({"type": "struct", "fields": [{"name": "variant", "type": "string",
            "metadata": {"comment": "variant"}}]});
        assert!(!holds_variant(&named));
        assert!(!holds_variant(&json!("string")));
    }

    #[test]
    fn statistics_are_delta_json_and_never_too_narrow() {
        assert_eq!(stat_value("long", "-42", false).map(|v| v.0), Some(json!(-42)));
        assert_eq!(stat_value("double", "nan", true), None);
        assert_eq!(stat_value("date", "2026-10-01", false).map(|v| v.0), Some(json!("2026-10-01")));
        // Microseconds widen to whole milliseconds: down for the minimum, up for the maximum.
        let min = stat_value("timestamp", "2026-10-01 05:00:00.123456+00", false).unwrap().0;
        let max = stat_value("timestamp", "2026-10-01 05:00:00.123456+00", true).unwrap().0;
        assert_eq!((min, max), (json!("2026-10-01T05:00:00.123Z"), json!("2026-10-01T05:00:00.124Z")));
        let exact = stat_value("timestamp_ntz", "2026-10-01 05:00:00.5", true).unwrap().0;
        assert_eq!(exact, json!("2026-10-01T05:00:00.500"));
        assert_eq!(stat_value("timestamp", "2026-10-01 05:00:00+02", true), None);
        assert_eq!(stat_value("string", &"x".repeat(300), true), None);
        assert_eq!(stat_value("binary", "ab", true), None);
    }
}
