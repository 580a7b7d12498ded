//! Merging manifests without decoding them: the live entries of several manifests become one
//! manifest whose entries are EXISTING, clustered by partition tuple, then path. Each entry's
//! `data_file` record is copied byte for byte when its manifest was written with the output's
//! writer schema (that of the input with the newest table schema), else re-encoded field by field into it
//! ([`crate::table::iceberg::avro_writer::transcode`]: Avro's schema resolution, refusing to
//! drop a value); only the status, snapshot id and sequence numbers before it are written afresh
//! (explicit, as inherited).
//!
//! iceberg-rust's reader and writer hold every entry of a merge as a tree of values (column
//! sizes, counts and bounds of every column of every file) three times over (decoded, in the
//! writer, read back): a third of a GiB for one 8 MiB manifest of 66,000 files. This merge holds
//! each entry's bytes (a few hundred) and each manifest's distinct partition tuples, and is what
//! a million-file table's manifest rewrite runs on.
//!
//! It merges only what it can carry as it is: format v1 or v2 (v3 data files may inherit their
//! `first_row_id`, which must then be written into the record), manifests whose headers give
//! the table's format version, the spec id and spec of the table and the content of the list,
//! partition values of the types the lean reader decodes
//! ([`crate::table::iceberg::manifest_reader`]), entries of the manifest's content whose
//! sequence numbers are known. Anything else returns `None`, and the caller merges with
//! iceberg-rust. What it writes is read back with apache-avro (not this module's reader):
//! [`read_back`]. Test builds also decode inputs and output with iceberg-rust and write the same
//! entries with iceberg-rust's writer, and fail on any difference (`cross_check`).

use bytes::Bytes;
use iceberg::spec::{
    Datum, FieldSummary, FormatVersion, Literal, ManifestContentType, ManifestFile, PrimitiveLiteral, PrimitiveType,
    TableMetadata, Type, UNASSIGNED_SEQUENCE_NUMBER,
};

use crate::table::iceberg::avro::{Cursor, Shape};
use crate::table::iceberg::avro_writer::{ContainerWriter, transcode, write_integer};
use crate::table::iceberg::manifest_reader::{Views, Walker, tuple};
use crate::table::iceberg::partition;

/// What a rewritten entry must keep: path, content, the snapshot that added it, sequence
/// numbers, rows, size, and (format v3) the first row id and a deletion vector's offset.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct EntryKey {
    pub path: String,
    /// 0 data, 1 position deletes, 2 equality deletes.
    pub content: i32,
    pub snapshot_id: Option<i64>,
    pub sequence_number: Option<i64>,
    pub file_sequence_number: Option<i64>,
    pub record_count: u64,
    pub size: u64,
    pub first_row_id: Option<i64>,
    pub content_offset: Option<i64>,
}

impl EntryKey {
    /// The key of an entry iceberg-rust decoded (inheritance applied).
    pub fn of(entry: &iceberg::spec::ManifestEntry) -> EntryKey {
        let file = entry.data_file();
        EntryKey {
            path: file.file_path().to_string(),
            content: file.content_type() as i32,
            snapshot_id: entry.snapshot_id(),
            sequence_number: entry.sequence_number(),
            file_sequence_number: entry.file_sequence_number,
            record_count: file.record_count(),
            size: file.file_size_in_bytes(),
            first_row_id: file.first_row_id(),
            content_offset: file.content_offset(),
        }
    }

    /// Format v1 manifests carry no sequence numbers: keys compared without them.
    pub fn without_sequence_numbers(mut self) -> EntryKey {
        (self.sequence_number, self.file_sequence_number) = (None, None);
        self
    }
}

/// One manifest merged from several.
pub struct Merged {
    /// The manifest file's bytes.
    pub bytes: Vec<u8>,
    /// Its manifest-list entry (sequence number unassigned: the list writer gives it the new
    /// snapshot's).
    pub file: ManifestFile,
    /// The entries it holds, as the inputs list them (inheritance applied), in its order.
    pub expected: Vec<EntryKey>,
}

/// One live entry of a merge: where its `data_file` bytes (in the output's schema) and its path
/// are in the arenas, and what is written before them.
struct Kept {
    record: (usize, usize),
    path: (usize, usize),
    /// The entry's partition tuple (of `tuples`).
    slot: usize,
    key: EntryKey,
}

/// One input manifest opened for the merge: its walker and how its entries read.
struct Input<'a> {
    walker: Walker<'a>,
    view: std::sync::Arc<crate::table::iceberg::manifest_reader::PartitionView>,
    partition_fields: crate::table::iceberg::manifest_reader::PartitionFields,
}

/// The live entries of `inputs` (manifest-list entries of `metadata`'s table's current snapshot,
/// with their bytes; one content, one spec) as one manifest at `path` added by `snapshot_id`,
/// written with the header and writer schema of the input with the newest table schema (the others' records
/// transcoded to it); `None` when they cannot be merged so (see the module doc).
pub fn merge(
    metadata: &TableMetadata,
    inputs: &[(ManifestFile, Bytes)],
    path: &str,
    snapshot_id: i64,
) -> Option<Merged> {
    if metadata.format_version() == FormatVersion::V3 {
        return None;
    }
    let (first_file, _) = inputs.first()?;
    let (spec_id, content) = (first_file.partition_spec_id, first_file.content);
    let mut opened = open_inputs(metadata, inputs, spec_id, content)?;
    // The output is written as the input with the newest table schema was (schema ids only
    // grow; then the latest commit's, by sequence number): iceberg-rust decodes the column
    // bounds of an entry by the header's schema, and drops those of columns it lacks. Snapshot
    // ids are random, no order.
    let schema_id = |input: &Input<'_>| {
        let id = input.walker.container.meta.get("schema-id").and_then(|v| std::str::from_utf8(v).ok());
        id.and_then(|v| v.trim().parse::<i64>().ok()).unwrap_or(-1)
    };
    let newest = (0..inputs.len()).max_by_key(|&i| (schema_id(&opened[i]), inputs[i].0.sequence_number, i))?;
    let out_meta = &opened[newest].walker.container.meta;
    let mut meta: Vec<(String, Vec<u8>)> = out_meta.iter().map(|(k, v)| (k.clone(), v.to_vec())).collect();
    meta.sort();
    let out_schema: Vec<u8> = out_meta.get("avro.schema")?.to_vec();
    let top: Vec<(String, Shape)> = opened[newest].walker.container.fields.clone();
    let out_data_file = data_file_shape(&top)?;
    let partition_type = opened[newest].view.partition_type.clone();
    let mut entries = Entries::default();
    for ((file, _), input) in inputs.iter().zip(opened.iter_mut()) {
        entries.gather(file, input, content, &out_schema, &out_data_file)?;
    }
    drop(opened);
    entries.cluster();
    let Written { bytes, expected, rows, min_sequence_number } = entries.write(&meta, &top)?;
    let file = ManifestFile {
        manifest_path: path.to_string(),
        manifest_length: i64::try_from(bytes.len()).ok()?,
        partition_spec_id: spec_id,
        content,
        sequence_number: UNASSIGNED_SEQUENCE_NUMBER,
        min_sequence_number: min_sequence_number.unwrap_or(UNASSIGNED_SEQUENCE_NUMBER),
        added_snapshot_id: snapshot_id,
        added_files_count: Some(0),
        existing_files_count: Some(u32::try_from(expected.len()).ok()?),
        deleted_files_count: Some(0),
        added_rows_count: Some(0),
        existing_rows_count: Some(rows),
        deleted_rows_count: Some(0),
        partitions: Some(field_summaries(&partition_type, &entries.tuples)?),
        key_metadata: None,
        first_row_id: None,
    };
    Some(Merged { bytes, file, expected })
}

/// The shape of the `data_file` field among a manifest entry's `fields`.
fn data_file_shape(fields: &[(String, Shape)]) -> Option<Shape> {
    fields.iter().find(|(n, _)| n == "data_file").map(|(_, s)| s.clone())
}

/// Opens each of `inputs` for the merge; `None` when one is not a manifest of `metadata`'s
/// format version, of spec `spec_id` and `content`, with exactly the entry fields that version
/// writes and the header keys the merged manifest carries over.
fn open_inputs<'a>(
    metadata: &TableMetadata,
    inputs: &'a [(ManifestFile, Bytes)],
    spec_id: i32,
    content: ManifestContentType,
) -> Option<Vec<Input<'a>>> {
    let version = metadata.format_version();
    let content_name = match content {
        ManifestContentType::Data => "data",
        ManifestContentType::Deletes => "deletes",
    };
    // The entry's fields: status, snapshot id and (v2) sequence numbers, then the data file.
    let wanted: &[&str] = match version {
        FormatVersion::V1 => &["status", "snapshot_id", "data_file"],
        _ => &["status", "snapshot_id", "sequence_number", "file_sequence_number", "data_file"],
    };
    let views = Views::default();
    let mut opened: Vec<Input<'_>> = Vec::with_capacity(inputs.len());
    for (file, bytes) in inputs {
        if file.partition_spec_id != spec_id || file.content != content {
            return None;
        }
        let walker = Walker::open(bytes)?;
        let meta = &walker.container.meta;
        let says = |key: &str| meta.get(key).map(|v| String::from_utf8_lossy(v).into_owned());
        let names: Vec<&str> = walker.container.fields.iter().map(|(n, _)| n.as_str()).collect();
        let fits = says("format-version")? == (version as u8).to_string()
            && says("partition-spec-id")? == spec_id.to_string()
            && meta.contains_key("schema")
            && meta.contains_key("partition-spec")
            && (version == FormatVersion::V1 || says("content")? == content_name)
            && names.len() == wanted.len()
            && wanted.iter().all(|w| names.contains(w));
        if !fits {
            return None;
        }
        let view = views.get(metadata, spec_id, &walker.container)?;
        let partition_fields = walker.partition_fields()?;
        opened.push(Input { walker, view, partition_fields });
    }
    Some(opened)
}

/// A merged manifest as [`Entries::write`] wrote it.
struct Written {
    bytes: Vec<u8>,
    /// The entries' keys, in order.
    expected: Vec<EntryKey>,
    /// Their rows.
    rows: u64,
    /// Their lowest sequence number.
    min_sequence_number: Option<i64>,
}

/// The live entries of a merge: their `data_file` records (in the output's schema) and paths in
/// two arenas, each entry's place in them, and the distinct partition tuples.
#[derive(Default)]
struct Entries {
    records: Vec<u8>,
    paths: Vec<u8>,
    kept: Vec<Kept>,
    tuples: Vec<iceberg::spec::Struct>,
}

impl Entries {
    /// Adds the live entries of `input` (the manifest of list entry `file`), their records
    /// copied as written when its writer schema is `out_schema`, else transcoded to
    /// `out_data_file`; sequence numbers and snapshot ids inherited from `file`. `None` when an
    /// entry's content is not `content`'s, or a figure does not fit.
    fn gather(
        &mut self,
        file: &ManifestFile,
        input: &mut Input<'_>,
        content: ManifestContentType,
        out_schema: &[u8],
        out_data_file: &Shape,
    ) -> Option<()> {
        let file_content_fits =
            |c: i64| matches!((content, c), (ManifestContentType::Data, 0) | (ManifestContentType::Deletes, 1 | 2));
        let as_written = input.walker.container.meta.get("avro.schema").copied() == Some(out_schema);
        let in_data_file = data_file_shape(&input.walker.container.fields)?;
        let (view, partition_fields) = (&input.view, &input.partition_fields);
        let Entries { records, paths, kept, tuples } = self;
        // A manifest's distinct tuples (as its writer encoded them), each decoded once.
        let mut slots: foldhash::HashMap<Vec<u8>, usize> = foldhash::HashMap::default();
        input.walker.for_each(|e| {
            if e.status == 2 {
                return Some(());
            }
            if !file_content_fits(e.content) {
                return None;
            }
            // Inheritance from the list entry (ADDED is status 1).
            let inherits = crate::table::iceberg::manifest::inherits_sequence_numbers(e.status == 1, file);
            let inherited = |v: Option<i64>| v.or(inherits.then_some(file.sequence_number));
            let sequence_number = inherited(e.sequence_number)?;
            let file_sequence_number = inherited(e.file_sequence_number).unwrap_or(sequence_number);
            let slot = match slots.get(e.partition) {
                Some(slot) => *slot,
                None => {
                    tuples.push(tuple(e.partition, partition_fields, view)?);
                    slots.insert(e.partition.to_vec(), tuples.len() - 1);
                    tuples.len() - 1
                }
            };
            let start = records.len();
            if as_written {
                records.extend_from_slice(e.data_file);
            } else {
                transcode(&mut Cursor::new(e.data_file), &in_data_file, out_data_file, records)?;
            }
            let path_at = paths.len();
            paths.extend_from_slice(e.path.as_bytes());
            kept.push(Kept {
                record: (start, records.len()),
                path: (path_at, paths.len()),
                slot,
                key: EntryKey {
                    path: String::new(),
                    content: i32::try_from(e.content).ok()?,
                    snapshot_id: Some(e.snapshot_id.unwrap_or(file.added_snapshot_id)),
                    sequence_number: Some(sequence_number),
                    file_sequence_number: Some(file_sequence_number),
                    record_count: u64::try_from(e.record_count).ok()?,
                    size: u64::try_from(e.size).ok()?,
                    first_row_id: e.first_row_id,
                    content_offset: e.content_offset,
                },
            });
            Some(())
        })
    }

    /// Orders the entries by partition tuple (in the order of iceberg-rust's canonical form;
    /// equal tuples of different manifests rank alike), then path.
    fn cluster(&mut self) {
        let canonical: Vec<String> = self.tuples.iter().map(partition::canonical).collect();
        let mut distinct: Vec<&str> = canonical.iter().map(String::as_str).collect();
        distinct.sort_unstable();
        distinct.dedup();
        let rank: Vec<usize> = canonical.iter().map(|c| distinct.binary_search(&c.as_str()).unwrap_or(0)).collect();
        let paths = &self.paths;
        let path_of = |k: &Kept| &paths[k.path.0..k.path.1];
        self.kept.sort_by(|a, b| (rank[a.slot], path_of(a)).cmp(&(rank[b.slot], path_of(b))));
    }

    /// Writes the entries, EXISTING, as a manifest with the header `meta` and the entry fields
    /// `top` ([`Written`]).
    fn write(&self, meta: &[(String, Vec<u8>)], top: &[(String, Shape)]) -> Option<Written> {
        let mut writer = ContainerWriter::new(meta.iter().map(|(k, v)| (k.as_str(), v.as_slice())));
        let mut expected = Vec::with_capacity(self.kept.len());
        let (mut rows, mut min_sequence_number) = (0u64, None::<i64>);
        for k in &self.kept {
            writer.append(|out| {
                for (name, shape) in top {
                    match name.as_str() {
                        "status" => write_integer(out, shape, Some(0))?,
                        "snapshot_id" => write_integer(out, shape, k.key.snapshot_id)?,
                        "sequence_number" => write_integer(out, shape, k.key.sequence_number)?,
                        "file_sequence_number" => write_integer(out, shape, k.key.file_sequence_number)?,
                        _ => out.extend_from_slice(&self.records[k.record.0..k.record.1]),
                    }
                }
                Some(())
            })?;
            let mut key = k.key.clone();
            key.path = String::from_utf8(self.paths[k.path.0..k.path.1].to_vec()).ok()?;
            rows = rows.checked_add(key.record_count)?;
            if let Some(s) = key.sequence_number {
                min_sequence_number = Some(min_sequence_number.map_or(s, |m| m.min(s)));
            }
            expected.push(key);
        }
        Some(Written { bytes: writer.finish()?, expected, rows, min_sequence_number })
    }
}

/// The manifest list's partition summaries of `tuples` (every field: contains null, contains
/// NaN, lower and upper bound), as iceberg-rust's manifest writer computes them.
fn field_summaries(
    partition_type: &iceberg::spec::StructType,
    tuples: &[iceberg::spec::Struct],
) -> Option<Vec<FieldSummary>> {
    let mut out = Vec::with_capacity(partition_type.fields().len());
    for (i, field) in partition_type.fields().iter().enumerate() {
        let Type::Primitive(ty) = field.field_type.as_ref() else { return None };
        let (mut contains_null, mut contains_nan) = (false, false);
        let (mut lower, mut upper): (Option<Datum>, Option<Datum>) = (None, None);
        for t in tuples {
            let Some(value) = t.iter().nth(i)? else {
                contains_null = true;
                continue;
            };
            let datum = datum(ty, value)?;
            if datum.is_nan() {
                contains_nan = true;
                continue;
            }
            if lower.as_ref().is_none_or(|l| datum < *l) {
                lower = Some(datum.clone());
            }
            if upper.as_ref().is_none_or(|u| datum > *u) {
                upper = Some(datum);
            }
        }
        out.push(FieldSummary {
            contains_null,
            contains_nan: Some(contains_nan),
            lower_bound: match lower {
                Some(d) => Some(d.to_bytes().ok()?),
                None => None,
            },
            upper_bound: match upper {
                Some(d) => Some(d.to_bytes().ok()?),
                None => None,
            },
        });
    }
    Some(out)
}

/// `value` (a partition value of type `ty`, as the lean reader makes them) as a typed datum.
fn datum(ty: &PrimitiveType, value: &Literal) -> Option<Datum> {
    use PrimitiveLiteral as L;
    use PrimitiveType as P;
    let Literal::Primitive(value) = value else { return None };
    Some(match (ty, value) {
        (P::Boolean, L::Boolean(v)) => Datum::bool(*v),
        (P::Int, L::Int(v)) => Datum::int(*v),
        (P::Long, L::Long(v)) => Datum::long(*v),
        (P::Float, L::Float(v)) => Datum::float(v.0),
        (P::Double, L::Double(v)) => Datum::double(v.0),
        (P::Date, L::Int(v)) => Datum::date(*v),
        (P::Time, L::Long(v)) => Datum::time_micros(*v).ok()?,
        (P::Timestamp, L::Long(v)) => Datum::timestamp_micros(*v),
        (P::Timestamptz, L::Long(v)) => Datum::timestamptz_micros(*v),
        (P::String, L::String(v)) => Datum::string(v),
        _ => return None,
    })
}

/// The entries of the manifest `bytes` as apache-avro (Avro's reference implementation in Rust,
/// not the lean reader) reads them, with explicit snapshot ids and sequence numbers; an error
/// names what is wrong, including an entry that is not EXISTING.
pub fn read_back(bytes: &[u8]) -> std::result::Result<Vec<EntryKey>, String> {
    use apache_avro::types::Value;
    fn field<'v>(fields: &'v [(String, Value)], name: &str) -> Option<&'v Value> {
        fields.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }
    fn integer(value: Option<&Value>) -> Option<i64> {
        match value? {
            Value::Int(v) => Some(i64::from(*v)),
            Value::Long(v) => Some(*v),
            Value::Union(_, inner) => integer(Some(inner)),
            _ => None,
        }
    }
    let reader = apache_avro::Reader::new(bytes).map_err(|e| format!("not an Avro file: {e}"))?;
    let mut out = Vec::new();
    for value in reader {
        let value = value.map_err(|e| format!("entry {} cannot be read: {e}", out.len()))?;
        let Value::Record(entry) = value else { return Err("an entry is not a record".into()) };
        let Some(Value::Record(file)) = field(&entry, "data_file") else {
            return Err("an entry has no data_file record".into());
        };
        let status = integer(field(&entry, "status"));
        if status != Some(0) {
            return Err(format!("an entry's status is {status:?}, not EXISTING (0)"));
        }
        let Some(Value::String(path)) = field(file, "file_path") else {
            return Err("an entry has no file_path".into());
        };
        let count = |name: &str| integer(field(file, name)).and_then(|v| u64::try_from(v).ok());
        out.push(EntryKey {
            path: path.clone(),
            content: integer(field(file, "content")).unwrap_or(0) as i32,
            snapshot_id: integer(field(&entry, "snapshot_id")),
            sequence_number: integer(field(&entry, "sequence_number")),
            file_sequence_number: integer(field(&entry, "file_sequence_number")),
            record_count: count("record_count").ok_or("an entry has no record_count")?,
            size: count("file_size_in_bytes").ok_or("an entry has no file_size_in_bytes")?,
            first_row_id: integer(field(file, "first_row_id")),
            content_offset: integer(field(file, "content_offset")),
        });
    }
    Ok(out)
}

/// Test builds: `merged` (of `inputs`) as iceberg-rust sees it — decoded, every entry EXISTING
/// and equal to the live input entry of its path (data file whole: stats, bounds, partition;
/// snapshot id, sequence numbers) — and its list entry (counts, partition summaries) as
/// iceberg-rust's writer makes it of the same entries.
#[cfg(feature = "test-hooks")]
pub async fn cross_check(
    metadata: &TableMetadata,
    inputs: &[(ManifestFile, Bytes)],
    merged: &Merged,
) -> std::result::Result<(), String> {
    use iceberg::spec::{ManifestEntry, ManifestStatus};

    use crate::table::iceberg::manifest::decode_bytes;

    let mut live: Vec<ManifestEntry> = Vec::new();
    let mut binding = None;
    for (file, bytes) in inputs {
        let manifest = decode_bytes(bytes, metadata, file).map_err(|e| e.to_string())?;
        let m = manifest.metadata();
        binding.get_or_insert_with(|| (m.schema().clone(), m.partition_spec().clone()));
        live.extend(manifest.entries().iter().filter(|e| e.is_alive()).map(|e| e.as_ref().clone()));
    }
    let output = decode_bytes(&merged.bytes, metadata, &merged.file).map_err(|e| e.to_string())?;
    let written: Vec<&ManifestEntry> = output.entries().iter().map(|e| e.as_ref()).collect();
    if written.len() != live.len() {
        return Err(format!("{} entries written of {} live", written.len(), live.len()));
    }
    let order: std::collections::HashMap<&str, usize> =
        merged.expected.iter().enumerate().map(|(i, k)| (k.path.as_str(), i)).collect();
    live.sort_by_key(|e| order.get(e.file_path()).copied());
    for (w, l) in written.iter().zip(&live) {
        let same = w.status() == ManifestStatus::Existing
            && w.data_file() == l.data_file()
            && w.snapshot_id() == l.snapshot_id()
            && w.sequence_number() == l.sequence_number()
            && w.file_sequence_number == l.file_sequence_number.or(l.sequence_number());
        if !same {
            return Err(format!("entry '{}' differs: wrote {w:?}, read {l:?}", l.file_path()));
        }
    }
    let (schema, spec) = binding.ok_or("no input")?;
    let io = iceberg::io::FileIO::new_with_memory();
    let mut writer = crate::table::iceberg::new_snapshot::manifest_writer(
        &io,
        "memory:///cross-check.avro",
        merged.file.added_snapshot_id,
        schema,
        spec,
        metadata.format_version(),
        merged.file.content,
    )
    .map_err(|e| e.to_string())?;
    for e in live {
        let (snapshot, seq, file_seq) = (e.snapshot_id(), e.sequence_number(), e.file_sequence_number);
        writer
            .add_existing_file(e.data_file, snapshot.unwrap_or_default(), seq.unwrap_or_default(), file_seq.or(seq))
            .map_err(|e| e.to_string())?;
    }
    let theirs = writer.write_manifest_file().await.map_err(|e| e.to_string())?;
    let ours = ManifestFile {
        manifest_path: theirs.manifest_path.clone(),
        manifest_length: theirs.manifest_length,
        ..merged.file.clone()
    };
    if ours != theirs {
        return Err(format!("list entry: ours {ours:?}, iceberg-rust's {theirs:?}"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Arc;

    use iceberg::io::FileIO;
    use iceberg::spec::{
        DataContentType, DataFileBuilder, DataFileFormat, NestedField, Schema, SortOrder, TableMetadataBuilder,
        UnboundPartitionSpec,
    };

    use super::*;

    fn schema(id: i32, columns: &[(i32, &str)]) -> Schema {
        let fields: Vec<Arc<NestedField>> = columns
            .iter()
            .map(|(i, name)| Arc::new(NestedField::optional(*i, *name, Type::Primitive(PrimitiveType::Long))))
            .collect();
        Schema::builder().with_schema_id(id).with_fields(fields).build().unwrap()
    }

    /// One manifest of one ADDED file with the given bounds, written by iceberg-rust with
    /// `metadata`'s current schema, as snapshot `snapshot_id` at `sequence_number`.
    fn manifest(
        dir: &std::path::Path,
        metadata: &TableMetadata,
        snapshot_id: i64,
        sequence_number: i64,
        bounds: &[(i32, i64)],
    ) -> (ManifestFile, Bytes) {
        let path = dir.join(format!("{snapshot_id}.avro")).to_string_lossy().into_owned();
        let bounds: HashMap<i32, Datum> = bounds.iter().map(|(id, v)| (*id, Datum::long(*v))).collect();
        let file = DataFileBuilder::default()
            .content(DataContentType::Data)
            .file_path(format!("/t/data/{snapshot_id}.parquet"))
            .file_format(DataFileFormat::Parquet)
            .partition(iceberg::spec::Struct::empty())
            .partition_spec_id(0)
            .record_count(10)
            .file_size_in_bytes(1000)
            .lower_bounds(bounds.clone())
            .upper_bounds(bounds)
            .build()
            .unwrap();
        let mut list_entry = crate::runtime::block_on(async {
            let io = FileIO::new_with_fs();
            let mut w = crate::table::iceberg::new_snapshot::manifest_writer(
                &io,
                &path,
                snapshot_id,
                metadata.current_schema().clone(),
                metadata.default_partition_spec().as_ref().clone(),
                FormatVersion::V2,
                ManifestContentType::Data,
            )
            .unwrap();
            w.add_file(file, sequence_number).unwrap();
            w.write_manifest_file().await.unwrap()
        })
        .unwrap();
        list_entry.sequence_number = sequence_number;
        (list_entry, Bytes::from(std::fs::read(&path).unwrap()))
    }

    /// The older manifest (schema 0: `id`) has the larger snapshot id; the newer (schema 1 adds
    /// `x`) the smaller. The merged manifest is written as the newer one was, so iceberg-rust
    /// reads every bound of both files (with the older header, `x`'s bounds were dropped), and
    /// apache-avro reads back exactly the two entries, EXISTING, as inherited.
    #[test]
    fn the_output_takes_the_newest_schema_whatever_the_snapshot_ids() {
        let dir = std::env::temp_dir().join(format!("lakehouse-merge-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let unpartitioned = UnboundPartitionSpec::builder().with_spec_id(0).build();
        let old = TableMetadataBuilder::new(
            schema(0, &[(1, "id")]),
            unpartitioned,
            SortOrder::unsorted_order(),
            "/t".into(),
            FormatVersion::V2,
            Default::default(),
        )
        .unwrap()
        .build()
        .unwrap()
        .metadata;
        let new = TableMetadataBuilder::new_from_metadata(old.clone(), None)
            .add_current_schema(schema(1, &[(1, "id"), (2, "x")]))
            .unwrap()
            .build()
            .unwrap()
            .metadata;
        let inputs = vec![manifest(&dir, &old, 999, 1, &[(1, 5)]), manifest(&dir, &new, 1, 2, &[(1, 6), (2, 7)])];
        let merged = merge(&new, &inputs, "/t/metadata/merged.avro", 42).expect("merged lean");
        let decoded = crate::table::iceberg::manifest::decode_bytes(&merged.bytes, &new, &merged.file).unwrap();
        let bounds: Vec<usize> = decoded.entries().iter().map(|e| e.data_file().lower_bounds().len()).collect();
        assert_eq!(bounds, vec![2, 1], "the newer file keeps both bounds (clustered by path: 1 before 999)");
        let mut got = read_back(&merged.bytes).unwrap();
        got.sort();
        let mut want = merged.expected.clone();
        want.sort();
        assert_eq!(got, want);
        assert_eq!(
            want.iter().map(|k| (k.snapshot_id, k.sequence_number, k.file_sequence_number)).collect::<Vec<_>>(),
            vec![(Some(1), Some(2), Some(2)), (Some(999), Some(1), Some(1))]
        );
        assert_eq!((merged.file.existing_files_count, merged.file.min_sequence_number), (Some(2), 1));
        #[cfg(feature = "test-hooks")]
        crate::runtime::block_on(cross_check(&new, &inputs, &merged)).unwrap().unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
