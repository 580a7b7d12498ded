//! Position delete rewrite (Java's `rewrite_position_delete_files`): per partition, the live
//! Parquet position delete files are read, their positions that no longer delete a live row
//! dropped, and the rest written again — on a format v2 table as one position delete file per
//! partition, on a v3 table as deletion vectors (one per data file, merged with the vector the
//! file already has). One `replace` snapshot; no data file is read, written or removed.
//!
//! A position is kept when it names a live data file (by the exact path the manifests write) whose
//! data sequence number is at most its delete file's, the spec's rule for it to apply; the
//! rewritten file takes the highest data sequence number of the files it replaces, so each
//! position still applies to the file it named and to no other (a position names its file).
//! A new vector takes the commit's sequence number (it is written now, as a writer's would be).
//!
//! Safety rules:
//! - the rows a reader sees do not change: every position that deleted a live row still does;
//! - the commit is exclusive (catalog or `vN.metadata.json`); a table that moved meanwhile is
//!   planned again from its new head (a writer may have added or replaced a vector, or removed
//!   a delete file), never committed on top of;
//! - on any failure before the commit the files written are removed; a commit whose outcome is
//!   unknown keeps them (orphan removal deletes them once nothing references them).

use std::collections::{BTreeMap, HashMap, HashSet};

use iceberg::spec::{
    DataContentType, DataFile as IcebergDataFile, DataFileBuilder, DataFileFormat, FormatVersion, ManifestContentType,
    Operation, TableMetadata,
};

use crate::duck::{HostDb, Nested, quote_file, quote_literal};
use crate::error::{Error, ErrorKind, Result};
use crate::interrupt;
use crate::interrupt::pause_for_tests;
use crate::runtime;
use crate::store::{TableRoot, duckdb_path};
use crate::table::deleted_rows::DeletedRows;
use crate::table::iceberg::commit::{commit_table, require_exclusive, settle_attempt};
use crate::table::iceberg::deletion_vector::{self, NewVector, is_deletion_vector};
use crate::table::iceberg::snapshot_builder::{SnapshotBuilder, carried_summary};
use crate::table::iceberg::{IcebergTable, LoadedManifest, with_counts};
use crate::table::{DataFile, FileContent, Located, PartitionKey};

/// Commit attempts before giving up on a table that keeps moving.
const MAX_COMMIT_ATTEMPTS: usize = 4;

/// The Parquet field ids of a position delete file's columns (the spec's reserved ids).
const FILE_PATH_FIELD_ID: i32 = 2_147_483_546;
const POS_FIELD_ID: i32 = 2_147_483_545;

/// What the user asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct RewritePositionDeletesOptions {
    /// On a v2 table, a partition is rewritten when it has at least this many position delete
    /// files (on v3 every partition with one is: its deletes become vectors).
    pub min_input_files: u64,
    /// Also convert equality deletes into positions (what Amoro's minor optimizing and Flink's
    /// `ConvertEqualityDeletes` do: readers then need not compare every row with every deleted
    /// key). A global equality delete (an unpartitioned spec's, in a partitioned table) is left.
    pub convert_equality_deletes: bool,
    /// Plan only.
    pub dry_run: bool,
}

impl Default for RewritePositionDeletesOptions {
    fn default() -> Self {
        Self { min_input_files: 2, convert_equality_deletes: false, dry_run: false }
    }
}

/// The plan and outcome for one partition's position deletes.
#[derive(Debug, Clone, PartialEq)]
pub struct DeletePartition {
    /// The partition's label, as the profile prints it.
    pub partition: String,
    /// Its spec.
    pub spec_id: i32,
    /// Whether its deletes are (or would be) rewritten.
    pub rewrites: bool,
    /// Why (or why not).
    pub reason: String,
    /// Position delete files (v2 Parquet ones) before.
    pub delete_files_before: u64,
    /// Positions in them (their record counts).
    pub deletes_before: u64,
    /// Delete files written (position delete files, or vectors); known once rewritten.
    pub delete_files_after: Option<u64>,
    /// Positions of these files that still delete a live row, written again (on v3 into
    /// vectors, with the positions the files' earlier vectors held); known once rewritten.
    pub deletes_after: Option<u64>,
}

/// What a rewrite did (or, dry, would do).
#[derive(Debug, Clone, Default)]
pub struct RewritePositionDeletesReport {
    /// Per partition with position delete files.
    pub partitions: Vec<DeletePartition>,
    /// Vectors the new ones replaced (merged into them).
    pub vectors_replaced: u64,
    /// The committed snapshot.
    pub snapshot_id: Option<i64>,
    /// The committed metadata file.
    pub metadata_location: Option<String>,
    /// Whether nothing was changed on purpose.
    pub dry_run: bool,
    /// What went wrong after the commit point without undoing it.
    pub warning: Option<String>,
}

/// Plans, and unless `dry_run` rewrites and commits, the position deletes of `located`.
pub fn rewrite_position_deletes(
    located: &Located,
    options: &RewritePositionDeletesOptions,
    host: &HostDb,
) -> Result<RewritePositionDeletesReport> {
    if options.min_input_files < 1 {
        return Err(Error::invalid("min_input_files must be at least 1"));
    }
    let mut located = located.clone();
    for _attempt in 0..MAX_COMMIT_ATTEMPTS {
        let table = IcebergTable::load(&located.metadata_location)?;
        let state = State::read(&table, options.convert_equality_deletes)?;
        let conn = host.connect()?;
        // Held while DuckDB reads and writes the table's files.
        let access = crate::store::prepare_remote(&conn, &TableRoot::of_metadata_file(&table.metadata_location)?)?;
        let mut report = RewritePositionDeletesReport {
            partitions: state.plan(&conn, options, table.metadata.format_version())?,
            dry_run: options.dry_run,
            warning: access.notice.clone(),
            ..Default::default()
        };
        if options.dry_run || !report.partitions.iter().any(|p| p.rewrites) {
            return Ok(report);
        }
        require_exclusive(&located)?;
        interrupt::check("nothing was committed")?;
        let mut scratch: Vec<String> = Vec::new();
        let attempt = (|| {
            let written = state.write(&table, &conn, &mut report, &mut scratch)?;
            let (metadata, snapshot_id) = state.snapshot(&table, &written, &mut scratch)?;
            report.vectors_replaced = written.replaced_vectors.len() as u64;
            pause_for_tests();
            interrupt::check("nothing was committed")?;
            Ok::<_, Error>((commit_table(&located, &table, &metadata)?, snapshot_id))
        })();
        if let Some(landed) = settle_attempt(&mut located, attempt, &scratch, "new delete files")? {
            report.snapshot_id = Some(landed.snapshot_id);
            report.metadata_location = Some(landed.location);
            report.warning = landed.warning;
            return Ok(report);
        }
    }
    Err(Error::conflict(format!(
        "the table kept changing; gave up after {MAX_COMMIT_ATTEMPTS} attempts; nothing was committed"
    )))
}

/// The current snapshot's live files, with their manifest entries.
struct State {
    manifests: Vec<LoadedManifest>,
    files: Vec<DataFile>,
    /// For each model file: its manifest and entry.
    sources: Vec<(usize, usize)>,
    /// Per partition (of the delete files' own spec), the Parquet position delete files.
    by_partition: BTreeMap<PartitionKey, Vec<usize>>,
}

/// What [`State::write`] wrote.
struct Written {
    /// Delete files added (entries), with their partition spec and data sequence number
    /// (`None`: the commit's).
    added: Vec<(IcebergDataFile, i32, Option<i64>)>,
    /// Entries removed: the position delete files read.
    replaced_files: HashSet<(String, Option<i64>)>,
    /// Entries removed: the vectors merged into new ones.
    replaced_vectors: HashSet<(String, Option<i64>)>,
    /// Positions written.
    positions: u64,
}

impl State {
    fn read(table: &IcebergTable, convert_equality_deletes: bool) -> Result<Self> {
        let listed = table.current_manifests()?;
        // Without delete manifests there is no delete file to rewrite: nothing is decoded.
        let manifests = match listed.iter().any(|m| m.content == ManifestContentType::Deletes) {
            true => table.decode_manifests(listed)?,
            false => Vec::new(),
        };
        let (mut files, mut sources) = (Vec::new(), Vec::new());
        for (m, loaded) in manifests.iter().enumerate() {
            let alive = loaded.manifest.entries().iter().enumerate().filter(|(_, e)| e.is_alive()).map(|(i, _)| i);
            for (file, entry) in table.model_files(loaded).into_iter().zip(alive) {
                files.push(file);
                sources.push((m, entry));
            }
        }
        let mut by_partition: BTreeMap<PartitionKey, Vec<usize>> = BTreeMap::new();
        for (i, f) in files.iter().enumerate() {
            let equality = convert_equality_deletes && f.content == FileContent::EqualityDeletes;
            let scoped = !f.global || files.iter().all(|d| d.content != FileContent::Data || d.key == f.key);
            if (f.content == FileContent::PositionDeletes || (equality && scoped)) && f.parquet {
                by_partition.entry(f.key.clone()).or_default().push(i);
            }
        }
        // Every file a rewrite may read is on the table's store, before any is read.
        TableRoot::of_metadata_file(&table.metadata_location)?.check_reads(files.iter().map(|f| f.path.as_str()))?;
        Ok(Self { manifests, files, sources, by_partition })
    }

    fn source(&self, i: usize) -> &IcebergDataFile {
        let (m, e) = self.sources[i];
        self.manifests[m].manifest.entries()[e].data_file()
    }

    /// Per partition with Parquet position delete files: whether it is rewritten, and why. A
    /// partition with fewer files than `min_input_files` is rewritten all the same when some of
    /// its positions no longer delete a live row (counted by reading its delete files).
    fn plan(
        &self,
        conn: &Nested,
        options: &RewritePositionDeletesOptions,
        version: FormatVersion,
    ) -> Result<Vec<DeletePartition>> {
        self.by_partition
            .values()
            .map(|deletes| {
                let first = &self.files[deletes[0]];
                let count = deletes.len() as u64;
                let records: u64 = deletes.iter().map(|&d| self.files[d].record_count).sum();
                let equality =
                    deletes.iter().filter(|&&d| self.files[d].content == FileContent::EqualityDeletes).count();
                let unreadable = equality > 0 && self.data_in_scope(deletes).iter().any(|&i| !self.files[i].parquet);
                let outranked = match version >= FormatVersion::V3 {
                    true => self.unread_position_deletes(deletes),
                    false => 0,
                };
                let (rewrites, reason) = if outranked > 0 {
                    (
                        false,
                        format!(
                            "{outranked} ORC or Avro position delete files apply to its data files; this rewrite does not \
                             read them, and a deletion vector written beside them would make readers ignore them (a \
                             vector replaces every earlier position delete of its data file)"
                        ),
                    )
                } else if unreadable {
                    (
                        false,
                        format!(
                            "{equality} equality delete files apply to ORC or Avro data files, which are not read to \
                             convert them"
                        ),
                    )
                } else if equality > 0 {
                    let into = if version >= FormatVersion::V3 { "deletion vectors" } else { "1 position delete file" };
                    (true, format!("{count} delete files ({equality} equality) -> {into}"))
                } else if version >= FormatVersion::V3 {
                    (true, format!("{count} position delete files -> deletion vectors (format v3)"))
                } else if count >= options.min_input_files {
                    (true, format!("{count} position delete files -> 1, positions of no live row dropped"))
                } else {
                    let sql = self.positions_sql(deletes, &self.data_in_scope(deletes));
                    let live = conn.query(&format!("SELECT count(*) FROM ({sql})"))?.first("a count")?[0].int()? as u64;
                    if live < records {
                        (true, format!("{} of {records} positions delete no live row", records - live))
                    } else {
                        (false, format!("{count} position delete files < min_input_files {}", options.min_input_files))
                    }
                };
                Ok(DeletePartition {
                    partition: first.partition.clone(),
                    spec_id: first.spec_id,
                    rewrites,
                    reason,
                    delete_files_before: count,
                    deletes_before: records,
                    delete_files_after: None,
                    deletes_after: None,
                })
            })
            .collect()
    }

    /// How many live position delete files that are neither Parquet nor deletion vectors (ORC,
    /// Avro: this rewrite reads Parquet only) apply to a data file the partition's `deletes` can
    /// apply to. On format v3 the rewrite writes deletion vectors, and a reader takes a data
    /// file's vector in place of every earlier position delete of it (the spec; Java's
    /// `DeleteFileIndex.forDataFile`): rows those files alone delete would come back.
    fn unread_position_deletes(&self, deletes: &[usize]) -> usize {
        let data = self.data_in_scope(deletes);
        (0..self.files.len())
            .filter(|&d| self.files[d].content == FileContent::PositionDeletes && !self.files[d].parquet)
            .filter(|&d| !is_deletion_vector(self.source(d)))
            .filter(|&d| data.iter().any(|&i| self.files[d].applies_to(&self.files[i])))
            .count()
    }

    /// The live data files (model indices) a delete file of partition `key` can apply to.
    fn data_in_scope(&self, deletes: &[usize]) -> Vec<usize> {
        (0..self.files.len())
            .filter(|&i| self.files[i].content == FileContent::Data)
            .filter(|&i| deletes.iter().any(|&d| self.files[d].applies_to_partition(&self.files[i].key, i64::MIN)))
            .collect()
    }

    /// Live deletion vectors (model indices) by the data file they delete rows of; two for one
    /// file is a corrupt table.
    fn live_vectors(&self) -> Result<HashMap<String, usize>> {
        let mut existing: HashMap<String, usize> = HashMap::new();
        for i in (0..self.files.len()).filter(|&i| is_deletion_vector(self.source(i))) {
            let Some(target) = self.files[i].referenced_data_file.clone() else { continue };
            if existing.insert(target.clone(), i).is_some() {
                return Err(Error::new(
                    ErrorKind::CorruptMetadata,
                    format!(
                        "data file '{target}' has two live deletion vectors (the spec allows one); the table is corrupt \
                         and nothing was rewritten"
                    ),
                ));
            }
        }
        Ok(existing)
    }

    /// Writes the new delete files of every partition the plan rewrites (recorded in `scratch`)
    /// and fills in the report's figures.
    fn write(
        &self,
        table: &IcebergTable,
        conn: &Nested,
        report: &mut RewritePositionDeletesReport,
        scratch: &mut Vec<String>,
    ) -> Result<Written> {
        let v3 = table.metadata.format_version() >= FormatVersion::V3;
        let mut written = Written {
            added: Vec::new(),
            replaced_files: HashSet::new(),
            replaced_vectors: HashSet::new(),
            positions: 0,
        };
        // New vectors by data file: positions of one file from two partitions' groups (a global
        // position delete and a partition's) go into one vector, never two.
        let mut vectors: BTreeMap<String, NewVector> = BTreeMap::new();
        let existing = self.live_vectors()?;
        for (plan, deletes) in report.partitions.iter_mut().zip(self.by_partition.values()) {
            if !plan.rewrites {
                continue;
            }
            interrupt::check("nothing was committed")?;
            let data = self.data_in_scope(deletes);
            let data_by_path: HashMap<&str, usize> = data.iter().map(|&i| (self.files[i].path.as_str(), i)).collect();
            let positions = self.kept_positions_sql(table, conn, deletes, &data)?;
            if v3 {
                let rows = read_positions(conn, &positions)?;
                let (mut files_here, mut positions_here) = (0u64, 0u64);
                for (path, deleted) in rows {
                    let Some(&d) = data_by_path.get(path.as_str()) else { continue };
                    positions_here += deleted.rows.len();
                    if let Some(already) = vectors.get_mut(&path) {
                        already.deleted.rows |= deleted.rows;
                        continue;
                    }
                    let mut deleted = deleted;
                    if let Some(&old) = existing.get(&path) {
                        let before =
                            crate::runtime::block_on(deletion_vector::read(&table.file_io, self.source(old)))??;
                        deleted.rows |= before.rows;
                        written.replaced_vectors.insert((self.files[old].path.clone(), self.files[old].content_offset));
                    }
                    files_here += 1;
                    let vector = NewVector {
                        data_file: path.clone(),
                        partition: self.source(d).partition().clone(),
                        spec_id: self.files[d].spec_id,
                        deleted,
                    };
                    vectors.insert(path, vector);
                }
                plan.delete_files_after = Some(files_here);
                plan.deletes_after = Some(positions_here);
            } else {
                let first = &self.files[deletes[0]];
                let (file, rows) = self.write_position_file(table, conn, deletes, &positions, scratch)?;
                plan.delete_files_after = Some(u64::from(file.is_some()));
                plan.deletes_after = Some(rows);
                written.positions += rows;
                if let Some(file) = file {
                    let seq = deletes.iter().map(|&d| self.files[d].data_sequence_number).max();
                    written.added.push((file, first.spec_id, seq));
                }
            }
            written.replaced_files.extend(deletes.iter().map(|&d| (self.files[d].path.clone(), None)));
        }
        let vectors: Vec<NewVector> = vectors.into_values().collect();
        let records: HashMap<&str, u64> = self
            .files
            .iter()
            .filter(|f| f.content == FileContent::Data)
            .map(|f| (f.path.as_str(), f.record_count))
            .collect();
        for v in &vectors {
            // No position past the file's rows: the vector would delete rows of another file.
            v.deleted.check_within(records.get(v.data_file.as_str()).copied().unwrap_or(0), &v.data_file)?;
        }
        if !vectors.is_empty() {
            let root = TableRoot::of_metadata_file(&table.metadata_location)?;
            let path = format!("{}/{}-deletes.puffin", data_dir(table, &root), uuid::Uuid::new_v4());
            scratch.push(path.clone());
            let entries = runtime::block_on(deletion_vector::write(&table.file_io, &path, &vectors))??;
            written.positions += vectors.iter().map(|v| v.deleted.rows.len()).sum::<u64>();
            written.added.extend(entries.into_iter().zip(&vectors).map(|(e, v)| (e, v.spec_id, None)));
        }
        Ok(written)
    }

    /// The `SELECT DISTINCT file_path, pos` that `deletes` delete among the live data files
    /// `data`: the positions of position delete files that still delete a row
    /// ([`State::positions_sql`]) and the rows equality deletes delete (the spec's rule: values
    /// equal in every equality column, the data file's sequence number below the delete's).
    fn kept_positions_sql(
        &self,
        table: &IcebergTable,
        conn: &Nested,
        deletes: &[usize],
        data: &[usize],
    ) -> Result<String> {
        use crate::action::compact::{DeleteSet, Input, files_have_field_ids};
        let (equality, position): (Vec<usize>, Vec<usize>) =
            deletes.iter().partition(|&&d| self.files[d].content == FileContent::EqualityDeletes);
        let mut parts = Vec::new();
        if !position.is_empty() {
            parts.push(self.positions_sql(&position, data));
        }
        if !equality.is_empty() && !data.is_empty() {
            let input = |i: usize| Input {
                file: self.source(i),
                sequence_number: self.files[i].data_sequence_number,
                first_row_id: None,
            };
            let inputs: Vec<Input<'_>> = data.iter().map(|&i| input(i)).collect();
            let equality_inputs: Vec<Input<'_>> = equality.iter().map(|&d| input(d)).collect();
            let local: Vec<String> = data.iter().map(|&i| duckdb_path(&self.files[i].path).to_string()).collect();
            let schema = table.metadata.current_schema();
            let ids = files_have_field_ids(conn, &local)?;
            let set = DeleteSet::new(conn, schema, &inputs, &equality_inputs, None, ids, false)?;
            parts.extend(set.deleted_positions_sql());
        }
        if parts.is_empty() {
            return Ok("SELECT NULL::VARCHAR AS file_path, NULL::BIGINT AS pos WHERE false".to_string());
        }
        let union: Vec<String> = parts.iter().map(|p| format!("({p})")).collect();
        Ok(format!("SELECT DISTINCT file_path, pos FROM ({})", union.join(" UNION ALL ")))
    }

    /// The `SELECT DISTINCT file_path, pos` of the position delete files `deletes` that still
    /// delete a row: naming one of the live data files `data` whose data sequence number is at
    /// most the delete file's.
    fn positions_sql(&self, deletes: &[usize], data: &[usize]) -> String {
        let delete_rows: Vec<String> = deletes
            .iter()
            .map(|&d| {
                format!(
                    "({}, {}::BIGINT)",
                    quote_literal(duckdb_path(&self.files[d].path)),
                    self.files[d].data_sequence_number
                )
            })
            .collect();
        let data_rows: Vec<String> = data
            .iter()
            .map(|&i| {
                format!("({}, {}::BIGINT)", quote_literal(&self.files[i].path), self.files[i].data_sequence_number)
            })
            .collect();
        let live = if data_rows.is_empty() {
            "(SELECT NULL::VARCHAR, NULL::BIGINT WHERE false)".to_string()
        } else {
            format!("(VALUES {})", data_rows.join(", "))
        };
        let files: Vec<String> = deletes.iter().map(|&d| quote_file(duckdb_path(&self.files[d].path))).collect();
        format!(
            "SELECT DISTINCT __r.file_path, __r.pos FROM read_parquet([{}], union_by_name = true, \
             filename = '__lakehouse_delete') AS __r \
             JOIN (VALUES {}) AS __s(__file, __seq) ON __r.__lakehouse_delete = __s.__file \
             JOIN {live} AS __live(__path, __seq) ON __r.file_path = __live.__path AND __live.__seq <= __s.__seq",
            files.join(", "),
            delete_rows.join(", ")
        )
    }

    /// Writes the positions of `positions` (sorted by path and position, as the spec asks) as one
    /// position delete file beside the first input; `None` when none is left (every position was
    /// of a row no longer live), with the rows written.
    fn write_position_file(
        &self,
        table: &IcebergTable,
        conn: &Nested,
        deletes: &[usize],
        positions: &str,
        scratch: &mut Vec<String>,
    ) -> Result<(Option<IcebergDataFile>, u64)> {
        let first = &self.files[deletes[0]];
        // Beside the first input when that is under the table's root, else in its data directory.
        let root = TableRoot::of_metadata_file(&table.metadata_location)?;
        let dir = match first.path.rsplit_once('/') {
            Some((dir, _)) if root.admits_output(dir) => dir.to_string(),
            _ => data_dir(table, &root),
        };
        let path = format!("{dir}/{}-deletes.parquet", uuid::Uuid::new_v4());
        scratch.push(path.clone());
        let local = duckdb_path(&path).to_string();
        let copied = conn
            .query(&format!(
                "COPY (SELECT file_path, pos FROM ({positions}) ORDER BY file_path, pos) TO {} (FORMAT parquet, \
                 FIELD_IDS {{file_path: {FILE_PATH_FIELD_ID}, pos: {POS_FIELD_ID}}}, RETURN_STATS)",
                quote_literal(&local)
            ))?
            .copy_stats()?;
        let (rows, bytes) = copied;
        if rows == 0 {
            crate::store::remove_quietly([local.as_str()]);
            return Ok((None, 0));
        }
        let named =
            conn.query(&format!("SELECT DISTINCT file_path FROM read_parquet({}) LIMIT 2", quote_file(&local)))?;
        let referenced = match named.rows.as_slice() {
            [one] => one[0].text().map(str::to_string),
            _ => None,
        };
        let source = self.source(deletes[0]);
        let file = DataFileBuilder::default()
            .content(DataContentType::PositionDeletes)
            .file_path(path)
            .file_format(DataFileFormat::Parquet)
            .partition(source.partition().clone())
            .partition_spec_id(first.spec_id)
            .record_count(rows)
            .file_size_in_bytes(bytes)
            .referenced_data_file(referenced)
            .build()
            .map_err(|e| Error::new(ErrorKind::CorruptMetadata, format!("position delete file entry: {e}")))?;
        Ok((Some(file), rows))
    }

    /// The manifests, list and metadata of the `replace` snapshot: delete entries `written`
    /// replaces marked DELETED, its new files ADDED; returns the metadata and snapshot id.
    fn snapshot(
        &self,
        table: &IcebergTable,
        written: &Written,
        scratch: &mut Vec<String>,
    ) -> Result<(TableMetadata, i64)> {
        let metadata = &table.metadata;
        let removes = |e: &iceberg::spec::ManifestEntry| {
            let key = (e.file_path().to_string(), e.data_file().content_offset());
            (written.replaced_files.contains(&(key.0.clone(), None)) && !is_deletion_vector(e.data_file()))
                || written.replaced_vectors.contains(&key)
        };
        let (mut removed, mut removed_positions) = (0u64, 0u64);
        runtime::block_on(async {
            let mut snapshot = SnapshotBuilder::new(table, scratch);
            for loaded in &self.manifests {
                let touched = loaded.file.content == ManifestContentType::Deletes
                    && loaded.manifest.entries().iter().any(|e| e.is_alive() && removes(e));
                if !touched {
                    snapshot.keep(with_counts(loaded));
                    continue;
                }
                let seen = |e: &iceberg::spec::ManifestEntry, dropped: bool| {
                    if dropped {
                        removed += 1;
                        removed_positions += e.record_count();
                    }
                };
                snapshot.rewrite_dropping(&[loaded], "m2", removes, seen).await?;
            }
            let expected = written.replaced_files.len() as u64 + written.replaced_vectors.len() as u64;
            if removed != expected {
                return Err(Error::new(
                    ErrorKind::CorruptMetadata,
                    format!(
                        "{removed} delete entries were found to replace, {expected} were planned; nothing was committed"
                    ),
                ));
            }
            let next_sequence = metadata.next_sequence_number();
            let added =
                written.added.iter().map(|(file, spec_id, seq)| (*spec_id, file.clone(), seq.unwrap_or(next_sequence)));
            snapshot.add_files(ManifestContentType::Deletes, "m3", added).await?;
            let mut properties = carried_summary(metadata, |k| k.starts_with("total-") && !k.contains("delete"));
            let live_deletes = self.files.iter().filter(|f| f.content != FileContent::Data).count() as u64;
            properties.extend([
                ("added-delete-files".to_string(), written.added.len().to_string()),
                ("removed-delete-files".to_string(), removed.to_string()),
                ("added-position-deletes".to_string(), written.positions.to_string()),
                ("removed-position-deletes".to_string(), removed_positions.to_string()),
                ("total-delete-files".to_string(), (live_deletes - removed + written.added.len() as u64).to_string()),
            ]);
            snapshot.finish(Operation::Replace, properties, None).await
        })?
    }
}

/// Where new delete files go when the inputs give no directory under the table's root:
/// `{location}/data`, or `{root}/data` when the metadata's location is not under the root.
fn data_dir(table: &IcebergTable, root: &TableRoot) -> String {
    format!("{}/data", root.base(table.metadata.location()))
}

/// The positions `positions` selects, per data file path, as bitmaps (read back from a temporary
/// Parquet file DuckDB writes, removed on return).
fn read_positions(conn: &Nested, positions: &str) -> Result<BTreeMap<String, DeletedRows>> {
    use arrow_array::{Array, Int64Array, StringArray};
    let temp = std::env::temp_dir().join(format!("lakehouse-positions-{}.parquet", uuid::Uuid::new_v4()));
    let temp_path = temp.to_string_lossy().into_owned();
    let result = (|| {
        conn.execute(&format!(
            "COPY (SELECT file_path::VARCHAR AS file_path, pos::BIGINT AS pos FROM ({positions})) TO {} (FORMAT parquet)",
            quote_literal(&temp_path)
        ))?;
        let file = std::fs::File::open(&temp)?;
        let failed =
            |e: &dyn std::fmt::Display| Error::new(ErrorKind::Io, format!("cannot read the positions back: {e}"));
        let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
            .map_err(|e| failed(&e))?
            .build()
            .map_err(|e| failed(&e))?;
        let mut out: BTreeMap<String, DeletedRows> = BTreeMap::new();
        for batch in reader {
            let batch = batch.map_err(|e| failed(&e))?;
            let paths =
                batch.column(0).as_any().downcast_ref::<StringArray>().ok_or_else(|| failed(&"file_path type"))?;
            let pos = batch.column(1).as_any().downcast_ref::<Int64Array>().ok_or_else(|| failed(&"pos type"))?;
            for row in 0..batch.num_rows() {
                if paths.is_null(row) || pos.is_null(row) || pos.value(row) < 0 {
                    return Err(Error::new(
                        ErrorKind::CorruptMetadata,
                        "a position delete file has a null or negative position; nothing was committed",
                    ));
                }
                out.entry(paths.value(row).to_string())
                    .or_insert_with(|| DeletedRows { rows: Default::default() })
                    .rows
                    .insert(pos.value(row) as u64);
            }
        }
        Ok(out)
    })();
    let _ = std::fs::remove_file(&temp);
    result
}
