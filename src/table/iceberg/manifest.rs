//! Reading a manifest the way Java Iceberg reads it.
//!
//! iceberg-rust decodes a manifest with the schema and partition spec embedded in its Avro header
//! (`schema`, `partition-spec`, `partition-spec-id`, `format-version`, `content`). Java does not
//! need them: `ManifestFiles.read(manifest, io, specsById)` binds the entries to the table's spec
//! named by the manifest list's `partition_spec_id`, and takes the content kind from the list.
//! Impala, Hive and some Flink versions write manifests whose headers lack those keys (Impala's
//! rewritten manifests even lack `format-version`). For such a manifest the missing keys are
//! filled in from the table metadata (the spec by id, bound to the newest schema it binds to; the
//! table's format version; the list's content kind) in a copy of the Avro header, and iceberg-rust
//! decodes the entries as usual. Present keys are never replaced.
//!
//! Entries then inherit their snapshot id and sequence numbers from the manifest-list entry, as
//! the spec says (the same rule as iceberg-rust's own `ManifestFile::load_manifest`).

use std::collections::BTreeMap;

use iceberg::io::FileIO;
use iceberg::spec::{FormatVersion, Manifest, ManifestContentType, ManifestFile, ManifestStatus, TableMetadata};

use crate::error::{Error, ErrorKind, Result};
use crate::table::iceberg::avro_writer::{write_bytes, write_long};
use crate::table::iceberg::stand_in::StandIns;

/// The sequence number of the first snapshot of a v1 table, which v1 manifests inherit.
const INITIAL_SEQUENCE_NUMBER: i64 = 0;

/// Reads and decodes the manifest that `file` (a manifest-list entry of `metadata`'s table) names.
pub async fn read(file_io: &FileIO, metadata: &TableMetadata, file: &ManifestFile) -> Result<Manifest> {
    let bytes = fetch(file_io, file).await?;
    decode_bytes(&bytes, metadata, file)
}

/// The bytes of the manifest `file` names; an encrypted one is refused.
pub async fn fetch(file_io: &FileIO, file: &ManifestFile) -> Result<bytes::Bytes> {
    let path = &file.manifest_path;
    if file.key_metadata.as_ref().is_some_and(|k| !k.is_empty()) {
        return Err(Error::new(
            ErrorKind::Unsupported,
            format!("manifest '{path}' is encrypted (key_metadata is set); encrypted tables are not supported"),
        ));
    }
    crate::table::iceberg::files::read_file(file_io, path, "manifest").await
}

/// Decodes the manifest `bytes` that `file` names.
pub fn decode_bytes(bytes: &[u8], metadata: &TableMetadata, file: &ManifestFile) -> Result<Manifest> {
    decode(bytes, metadata, file).map_err(|e| {
        Error::new(ErrorKind::CorruptMetadata, format!("manifest '{}' cannot be read", file.manifest_path))
            .with_context("cause", e)
    })
}

/// iceberg-rust's decoding of manifest `bytes`, a panic of it an error; its blocks are
/// decompressed first, within bounds ([`crate::table::iceberg::avro::uncompressed`]).
pub fn parse_avro(bytes: &[u8]) -> std::result::Result<Manifest, String> {
    let bytes = crate::table::iceberg::avro::uncompressed(bytes)?;
    crate::error::without_panic(|| Manifest::parse_avro(&bytes))?.map_err(|e| e.to_string())
}

/// Decodes manifest `bytes`, completing a header that lacks what iceberg-rust needs.
fn decode(bytes: &[u8], metadata: &TableMetadata, file: &ManifestFile) -> std::result::Result<Manifest, String> {
    let header = Header::parse(bytes)?;
    let completed = header.completed(bytes, metadata, file)?;
    let (entries, manifest_metadata) = parse_avro(completed.as_deref().unwrap_or(bytes))?.into_parts();
    let mut next_row_id = first_row_id(file);
    let spec_id = manifest_metadata.partition_spec().spec_id();
    let entries = entries
        .into_iter()
        .map(|entry| {
            let mut entry = std::sync::Arc::unwrap_or_clone(entry);
            inherit(&mut entry, file);
            inherit_first_row_id(&mut entry, &mut next_row_id, spec_id)?;
            Ok(entry)
        })
        .collect::<std::result::Result<_, String>>()?;
    Ok(Manifest::new(manifest_metadata, entries))
}

/// The spec's inheritance: a null snapshot id is the list entry's `added_snapshot_id`; null
/// sequence numbers are the list entry's for ADDED entries (and for every entry of a manifest
/// with the initial sequence number, i.e. v1 metadata).
fn inherit(entry: &mut iceberg::spec::ManifestEntry, file: &ManifestFile) {
    if entry.snapshot_id.is_none() {
        entry.snapshot_id = Some(file.added_snapshot_id);
    }
    let inherits = inherits_sequence_numbers(entry.status == ManifestStatus::Added, file);
    if entry.sequence_number.is_none() && inherits {
        entry.sequence_number = Some(file.sequence_number);
    }
    if entry.file_sequence_number.is_none() && inherits {
        entry.file_sequence_number = Some(file.sequence_number);
    }
}

/// Whether an entry of the manifest `file` names (`added`: its status is ADDED) takes the list
/// entry's sequence number for a null one of its own: the rule [`inherit`] applies, for the
/// lean readers that do not decode entries into iceberg-rust's.
pub(super) fn inherits_sequence_numbers(added: bool, file: &ManifestFile) -> bool {
    added || file.sequence_number == INITIAL_SEQUENCE_NUMBER
}

/// The first row id the manifest's data files inherit from (format v3 row lineage): the list
/// entry's `first_row_id`, for data manifests only.
fn first_row_id(file: &ManifestFile) -> Option<i64> {
    (file.content == ManifestContentType::Data).then_some(file.first_row_id).flatten().map(|id| id as i64)
}

/// The spec's first-row-id inheritance: a live (ADDED or EXISTING) data file whose
/// `first_row_id` is null gets the manifest's plus the record counts of the live files before it
/// in the manifest that had none (`next`, advanced here). A DELETED entry takes no id and
/// advances nothing: the manifest list reserved ids for the manifest's existing and added rows
/// only (Java's `ManifestReader.idAssigner` skips it too), so counting it would shift every later
/// file's rows onto ids of another manifest's. Written into the entry, so a manifest rewritten
/// from it keeps every row's id (a null would be assigned afresh by the next manifest list).
fn inherit_first_row_id(
    entry: &mut iceberg::spec::ManifestEntry,
    next: &mut Option<i64>,
    spec_id: i32,
) -> std::result::Result<(), String> {
    let Some(id) = *next else { return Ok(()) };
    if entry.data_file.first_row_id().is_some() || entry.status == ManifestStatus::Deleted {
        return Ok(());
    }
    let file = &entry.data_file;
    *next = Some(id.checked_add(file.record_count() as i64).ok_or("first_row_id overflows")?);
    let mut builder = iceberg::spec::DataFileBuilder::default();
    builder
        .content(file.content_type())
        .file_path(file.file_path().to_string())
        .file_format(file.file_format())
        .partition(file.partition().clone())
        .record_count(file.record_count())
        .file_size_in_bytes(file.file_size_in_bytes())
        .column_sizes(file.column_sizes().clone())
        .value_counts(file.value_counts().clone())
        .null_value_counts(file.null_value_counts().clone())
        .nan_value_counts(file.nan_value_counts().clone())
        .lower_bounds(file.lower_bounds().clone())
        .upper_bounds(file.upper_bounds().clone())
        .key_metadata(file.key_metadata().map(<[u8]>::to_vec))
        .split_offsets(file.split_offsets().map(<[i64]>::to_vec))
        .equality_ids(file.equality_ids())
        .first_row_id(Some(id))
        .partition_spec_id(spec_id)
        .referenced_data_file(file.referenced_data_file())
        .content_offset(file.content_offset())
        .content_size_in_bytes(file.content_size_in_bytes());
    if let Some(order) = file.sort_order_id() {
        builder.sort_order_id(order);
    }
    entry.data_file = builder.build().map_err(|e| format!("cannot give a data file its first_row_id: {e}"))?;
    Ok(())
}

/// An Avro object container file's header: its metadata map and where the data blocks start.
#[derive(Debug)]
struct Header {
    metadata: BTreeMap<String, Vec<u8>>,
    /// Offset of the 16-byte sync marker that ends the header.
    sync_at: usize,
}

const AVRO_MAGIC: &[u8; 4] = b"Obj\x01";

impl Header {
    fn parse(bytes: &[u8]) -> std::result::Result<Header, String> {
        if !bytes.starts_with(AVRO_MAGIC) {
            return Err("not an Avro file (no 'Obj' magic)".into());
        }
        let mut pos = AVRO_MAGIC.len();
        let mut metadata = BTreeMap::new();
        loop {
            let count = read_long(bytes, &mut pos)?;
            if count == 0 {
                break;
            }
            if count < 0 {
                read_long(bytes, &mut pos)?; // block size in bytes
            }
            for _ in 0..count.unsigned_abs() {
                let key = String::from_utf8(read_bytes(bytes, &mut pos)?.to_vec())
                    .map_err(|_| "an Avro header key is not UTF-8".to_string())?;
                let value = read_bytes(bytes, &mut pos)?.to_vec();
                metadata.insert(key, value);
            }
        }
        if bytes.len() < pos + 16 {
            return Err("the Avro header is truncated".into());
        }
        Ok(Header { metadata, sync_at: pos })
    }

    /// The file with the keys Java would take from the table metadata added to its header, or
    /// `None` when nothing is missing.
    fn completed(
        &self,
        bytes: &[u8],
        metadata: &TableMetadata,
        file: &ManifestFile,
    ) -> std::result::Result<Option<Vec<u8>>, String> {
        let mut added: Vec<(&str, Vec<u8>)> = Vec::new();
        let mut replaced: Vec<(&str, Vec<u8>)> = Vec::new();
        let has = |key: &str| self.metadata.contains_key(key);
        // A header schema with column types iceberg-rust lacks (v3 `variant`, …) gets stand-ins,
        // as the table metadata does ([`crate::table::iceberg::stand_in`]).
        if let Some(schema) = self.metadata.get("schema")
            && let Ok(mut value) = serde_json::from_slice::<serde_json::Value>(schema)
        {
            let mut stand_ins = StandIns::default();
            stand_ins.substitute_schema(&mut value);
            if !stand_ins.is_empty() {
                replaced.push(("schema", json(&value)?));
            }
        }
        if !has("format-version") && metadata.format_version() > FormatVersion::V1 {
            added.push(("format-version", (metadata.format_version() as u8).to_string().into_bytes()));
        }
        if !has("content") && file.content == ManifestContentType::Deletes {
            added.push(("content", b"deletes".to_vec()));
        }
        // Partition fields named outside Avro's ASCII names (Java and pyiceberg keep letters like
        // `í`) are renamed for iceberg-rust's parser, which refuses them; then the spec it reads
        // with names each field as the writer schema does, by field id.
        let mut avro_schema: Option<serde_json::Value> =
            self.metadata.get("avro.schema").and_then(|schema| serde_json::from_slice(schema).ok());
        if let Some(schema) = &mut avro_schema
            && make_partition_names_ascii(schema)
        {
            replaced.push(("avro.schema", json(schema)?));
        }
        if !has("schema") || !has("partition-spec") {
            let spec_id = file.partition_spec_id;
            let spec = metadata.partition_spec_by_id(spec_id).ok_or_else(|| {
                format!("its header has no partition spec and the table has no spec {spec_id} (from the manifest list)")
            })?;
            if !has("partition-spec") {
                let fields = json(spec.fields())?;
                let renamed = avro_schema.as_ref().and_then(|schema| spec_with_writer_names(&fields, schema));
                added.push(("partition-spec", renamed.unwrap_or(fields)));
                added.push(("partition-spec-id", spec_id.to_string().into_bytes()));
            }
            if !has("schema") {
                let schema = schema_binding(metadata, spec)?;
                added.push(("schema", json(schema.as_ref())?));
                added.push(("schema-id", schema.schema_id().to_string().into_bytes()));
            }
        }
        if let (Some(schema), Some(fields)) = (&avro_schema, self.metadata.get("partition-spec"))
            && let Some(renamed) = spec_with_writer_names(fields, schema)
        {
            replaced.push(("partition-spec", renamed));
        }
        if added.is_empty() && replaced.is_empty() {
            return Ok(None);
        }
        let mut out = Vec::with_capacity(bytes.len() + 1024);
        out.extend_from_slice(AVRO_MAGIC);
        let entries: Vec<(&str, &[u8])> = self
            .metadata
            .iter()
            .map(|(k, v)| match replaced.iter().find(|(r, _)| r == k) {
                Some((_, new)) => (k.as_str(), new.as_slice()),
                None => (k.as_str(), v.as_slice()),
            })
            .chain(added.iter().map(|(k, v)| (*k, v.as_slice())))
            .collect();
        write_long(&mut out, entries.len() as i64);
        for (key, value) in entries {
            write_bytes(&mut out, key.as_bytes());
            write_bytes(&mut out, value);
        }
        write_long(&mut out, 0);
        out.extend_from_slice(&bytes[self.sync_at..]);
        Ok(Some(out))
    }
}

/// Where the fields of the `data_file.partition` record are in a manifest's Avro writer schema:
/// the index of `data_file` among the entry's fields and of `partition` among its (`None` when
/// either is not an inline record where the spec puts it).
fn partition_path(schema: &serde_json::Value) -> Option<(usize, usize)> {
    let inline = |record: &serde_json::Value, name: &str| {
        let fields = record.get("fields")?.as_array()?;
        let i = fields.iter().position(|f| f.get("name").and_then(|n| n.as_str()) == Some(name))?;
        fields[i].get("type").is_some_and(serde_json::Value::is_object).then_some(i)
    };
    let i = inline(schema, "data_file")?;
    Some((i, inline(&schema["fields"][i]["type"], "partition")?))
}

/// The fields of a manifest's partition record in its Avro writer schema ([`partition_path`]).
fn partition_fields(schema: &serde_json::Value) -> Option<&Vec<serde_json::Value>> {
    let (i, j) = partition_path(schema)?;
    schema["fields"][i]["type"]["fields"][j]["type"].get("fields")?.as_array()
}

/// The `field-id` of each field of a manifest's partition record, in the writer's order
/// (`None`: a field without one), from its parsed Avro writer schema `schema`.
pub(super) fn partition_field_ids(schema: &serde_json::Value) -> Option<Vec<Option<i32>>> {
    let ids = partition_fields(schema)?
        .iter()
        .map(|f| f.get("field-id").and_then(serde_json::Value::as_i64).and_then(|id| i32::try_from(id).ok()));
    Some(ids.collect())
}

/// The spec's partition fields `spec_fields` (JSON) with each field named as the Avro writer
/// schema `schema` names the partition record's field of its `field-id`, or `None` when every
/// name already agrees. Java and pyiceberg write Avro-safe names (`event-date` becomes
/// `event_x2Ddate`, [`avro_safe_name`]) and resolve fields by id; iceberg-rust builds its reader
/// schema from the header's spec and resolves by name, so without this a partition value under
/// such a name read as null (and a compaction wrote it so).
fn spec_with_writer_names(spec_fields: &[u8], schema: &serde_json::Value) -> Option<Vec<u8>> {
    let written = partition_fields(schema)?;
    let writer_name = |id: i64| {
        written.iter().find_map(|f| {
            (f.get("field-id").and_then(serde_json::Value::as_i64) == Some(id)).then(|| f.get("name")?.as_str())?
        })
    };
    let mut spec: Vec<serde_json::Value> = serde_json::from_slice(spec_fields).ok()?;
    let mut renamed = false;
    for field in &mut spec {
        let Some(name) = field.get("field-id").and_then(serde_json::Value::as_i64).and_then(writer_name) else {
            continue;
        };
        if field.get("name").and_then(|n| n.as_str()) != Some(name) {
            field["name"] = serde_json::Value::from(name);
            renamed = true;
        }
    }
    renamed.then(|| serde_json::to_vec(&spec).ok()).flatten()
}

/// Renames, in the Avro writer schema `schema`, every partition field whose name apache-avro
/// refuses to [`avro_safe_name`]; whether any was.
fn make_partition_names_ascii(schema: &mut serde_json::Value) -> bool {
    let Some((i, j)) = partition_path(schema) else { return false };
    let Some(fields) =
        schema["fields"][i]["type"]["fields"][j]["type"].get_mut("fields").and_then(|f| f.as_array_mut())
    else {
        return false;
    };
    let mut renamed = false;
    for field in fields {
        let Some(name) = field.get("name").and_then(|n| n.as_str()) else { continue };
        if let std::borrow::Cow::Owned(safe) = avro_safe_name(name) {
            field["name"] = serde_json::Value::from(safe);
            renamed = true;
        }
    }
    renamed
}

/// `name` as an Avro name (what apache-avro accepts: an ASCII letter or `_`, then ASCII letters,
/// digits and `_`): unchanged when it is one, else each offending UTF-16 unit replaced as Java's
/// `AvroSchemaUtil.makeCompatibleName` does — a digit by `_` and itself, anything else by `_x` and
/// its code in upper-case hex (`event-date` → `event_x2Ddate`, `1st` → `_1st`). Java keeps
/// non-ASCII letters, which apache-avro refuses; they are replaced here too (`í` → `_xED`).
pub fn avro_safe_name(name: &str) -> std::borrow::Cow<'_, str> {
    let letter = |u: u16| u8::try_from(u).is_ok_and(|b| b.is_ascii_alphabetic());
    let digit = |u: u16| u8::try_from(u).is_ok_and(|b| b.is_ascii_digit());
    let units: Vec<u16> = name.encode_utf16().collect();
    let valid = |i: usize, u: u16| letter(u) || u == u16::from(b'_') || (i > 0 && digit(u));
    if units.iter().enumerate().all(|(i, &u)| valid(i, u)) {
        return std::borrow::Cow::Borrowed(name);
    }
    let mut out = String::with_capacity(name.len() + 8);
    for (i, &u) in units.iter().enumerate() {
        if valid(i, u) {
            out.push(char::from_u32(u32::from(u)).unwrap_or('_'));
        } else if digit(u) {
            out.push('_');
            out.push(char::from_u32(u32::from(u)).unwrap_or('_'));
        } else {
            out.push_str(&format!("_x{u:X}"));
        }
    }
    std::borrow::Cow::Owned(out)
}

/// The newest schema `spec` binds to (every source column present): the current one for any
/// spec that did not outlive a dropped column.
pub(super) fn schema_binding(
    metadata: &TableMetadata,
    spec: &iceberg::spec::PartitionSpec,
) -> std::result::Result<iceberg::spec::SchemaRef, String> {
    let mut schemas: Vec<_> = metadata.schemas_iter().cloned().collect();
    schemas.sort_by_key(|s| std::cmp::Reverse(s.schema_id()));
    let current = metadata.current_schema().clone();
    std::iter::once(current)
        .chain(schemas)
        .find(|s| spec.partition_type(s).is_ok())
        .ok_or_else(|| format!("partition spec {} binds to none of the table's schemas", spec.spec_id()))
}

fn json<T: serde::Serialize + ?Sized>(value: &T) -> std::result::Result<Vec<u8>, String> {
    serde_json::to_vec(value).map_err(|e| e.to_string())
}

/// An Avro `long`: zig-zag, variable length.
fn read_long(bytes: &[u8], pos: &mut usize) -> std::result::Result<i64, String> {
    let mut value: u64 = 0;
    for shift in (0..64).step_by(7) {
        let byte = *bytes.get(*pos).ok_or("the Avro header is truncated")?;
        *pos += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok((value >> 1) as i64 ^ -((value & 1) as i64));
        }
    }
    Err("an Avro header length is malformed".into())
}

fn read_bytes<'a>(bytes: &'a [u8], pos: &mut usize) -> std::result::Result<&'a [u8], String> {
    let len = usize::try_from(read_long(bytes, pos)?).map_err(|_| "a negative Avro length")?;
    let end = pos.checked_add(len).filter(|&e| e <= bytes.len()).ok_or("the Avro header is truncated")?;
    let out = &bytes[*pos..end];
    *pos = end;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn avro_safe_names_are_javas_for_ascii_and_ascii_only() {
        // Java's AvroSchemaUtil.makeCompatibleName (and pyiceberg's make_compatible_name) for these.
        for (name, want) in [
            ("event_date", "event_date"),
            ("event-date", "event_x2Ddate"),
            ("1st day", "_1st_x20day"),
            ("a.b", "a_x2Eb"),
            ("_x", "_x"),
            ("día", "d_xEDa"),
            ("😀", "_xD83D_xDE00"),
        ] {
            assert_eq!(avro_safe_name(name), want, "{name}");
        }
    }

    #[test]
    fn the_spec_iceberg_rust_reads_takes_the_writers_names_by_field_id() {
        let schema = r#"{"type":"record","name":"manifest_entry","fields":[{"name":"status","type":"int"},
            {"name":"data_file","type":{"type":"record","name":"r2","fields":[{"name":"partition","type":
            {"type":"record","name":"r102","fields":[{"name":"event_x2Ddate","type":["null","string"],"field-id":1000},
            {"name":"día","type":["null","int"],"field-id":1001}]}}]}}]}"#
            .as_bytes();
        let schema: serde_json::Value = serde_json::from_slice(schema).unwrap();
        let mut ascii = schema.clone();
        assert!(make_partition_names_ascii(&mut ascii), "día is renamed");
        let spec = r#"[{"name":"event-date","transform":"identity","source-id":2,"field-id":1000},
            {"name":"día","transform":"identity","source-id":3,"field-id":1001}]"#
            .as_bytes();
        let renamed: serde_json::Value =
            serde_json::from_slice(&spec_with_writer_names(spec, &ascii).unwrap()).unwrap();
        let names: Vec<&str> = renamed.as_array().unwrap().iter().map(|f| f["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["event_x2Ddate", "d_xEDa"]);
        assert_eq!(partition_field_ids(&schema), Some(vec![Some(1000), Some(1001)]));
        assert!(spec_with_writer_names(br#"[{"name":"event_x2Ddate","field-id":1000}]"#, &schema).is_none());
    }

    #[test]
    fn avro_longs_round_trip() {
        for v in [0i64, 1, -1, 63, -64, 64, 300, -300, i64::MAX, i64::MIN] {
            let mut out = Vec::new();
            write_long(&mut out, v);
            let mut pos = 0;
            assert_eq!(read_long(&out, &mut pos).unwrap(), v);
            assert_eq!(pos, out.len());
        }
    }

    #[test]
    fn headers_parse_and_refuse_garbage() {
        let mut file = AVRO_MAGIC.to_vec();
        write_long(&mut file, -1); // a block with its byte size, as Java writes
        write_long(&mut file, 9);
        write_bytes(&mut file, b"k");
        write_bytes(&mut file, b"v");
        write_long(&mut file, 0);
        file.extend_from_slice(&[7u8; 16]);
        file.extend_from_slice(b"data");
        let header = Header::parse(&file).unwrap();
        assert_eq!(header.metadata.get("k").map(Vec::as_slice), Some(&b"v"[..]));
        assert_eq!(&file[header.sync_at..header.sync_at + 16], &[7u8; 16]);
        assert!(Header::parse(b"PAR1").is_err());
        assert!(Header::parse(&file[..header.sync_at + 4]).is_err(), "truncated before the sync marker");
    }

    /// A v3 manifest a commit rewrote after an upgrade — [DELETED a (10 rows), EXISTING b (5),
    /// ADDED c (3)], none with an explicit `first_row_id` — under a list entry whose
    /// `first_row_id` is 100: the list reserved ids for b and c only, so b's rows are 100..105 and
    /// c's 105..108, and a gets none (it counted a before: b at 110, outside the range).
    #[test]
    fn first_row_id_inheritance_skips_deleted_entries() {
        use iceberg::spec::{
            DataContentType, DataFileBuilder, DataFileFormat, FormatVersion as V, NestedField, PrimitiveType, Schema,
            SortOrder, Struct, TableMetadataBuilder, Type, UnboundPartitionSpec,
        };
        let dir = std::env::temp_dir().join(format!("lakehouse-row-ids-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let schema = Schema::builder()
            .with_fields(vec![NestedField::required(1, "id", Type::Primitive(PrimitiveType::Long)).into()])
            .build()
            .unwrap();
        let location = dir.to_string_lossy().into_owned();
        let metadata = TableMetadataBuilder::new(
            schema.clone(),
            UnboundPartitionSpec::builder().build(),
            SortOrder::unsorted_order(),
            location.clone(),
            V::V3,
            Default::default(),
        )
        .unwrap()
        .build()
        .unwrap()
        .metadata;
        let file = |name: &str, rows: u64| {
            DataFileBuilder::default()
                .content(DataContentType::Data)
                .file_path(format!("{location}/{name}.parquet"))
                .file_format(DataFileFormat::Parquet)
                .partition(Struct::empty())
                .record_count(rows)
                .file_size_in_bytes(100)
                .partition_spec_id(0)
                .build()
                .unwrap()
        };
        let path = format!("{location}/m.avro");
        let file_io = iceberg::io::FileIO::new_with_fs();
        let written = crate::runtime::block_on(async {
            let mut writer = crate::table::iceberg::new_snapshot::manifest_writer(
                &file_io,
                &path,
                7,
                metadata.current_schema().clone(),
                metadata.default_partition_spec().as_ref().clone(),
                V::V3,
                ManifestContentType::Data,
            )
            .unwrap();
            writer.add_delete_file(file("a", 10), 1, Some(1)).unwrap();
            writer.add_existing_file(file("b", 5), 3, 1, Some(1)).unwrap();
            writer.add_file(file("c", 3), 2).unwrap();
            writer.write_manifest_file().await.unwrap()
        })
        .unwrap();
        let listed = ManifestFile { first_row_id: Some(100), ..written };
        let manifest = decode_bytes(&std::fs::read(&path).unwrap(), &metadata, &listed).unwrap();
        let ids: Vec<(String, Option<i64>)> = manifest
            .entries()
            .iter()
            .map(|e| (e.file_path().rsplit('/').next().unwrap().to_string(), e.data_file().first_row_id()))
            .collect();
        assert_eq!(
            ids,
            vec![("a.parquet".into(), None), ("b.parquet".into(), Some(100)), ("c.parquet".into(), Some(105))]
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}
