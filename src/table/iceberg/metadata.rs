//! Parsing what an Iceberg table's metadata files hold: the metadata JSON (gzip-compressed
//! too; column types iceberg-rust lacks held by stand-ins, v1/v2 fields a table upgraded to a
//! later version may lack filled in as Java reads them, column defaults the parse lost named) and
//! the manifest list, each read within bounds.

use iceberg::spec::{FormatVersion, ManifestFile, ManifestList, TableMetadata, Type};

use super::inflate;
use crate::error::{Error, ErrorKind, Result};
use crate::table::iceberg::stand_in::StandIns;

/// The fields whose `initial-default` or `write-default` the metadata file `bytes` gives and the
/// parsed `metadata` does not hold (iceberg-rust drops a default it cannot parse for the type),
/// as `schema <id> column '<name>' (id <id>)`. Read only when the file mentions a default.
fn lost_defaults(bytes: &[u8], metadata: &TableMetadata) -> Vec<String> {
    use serde_json::Value;
    let mentions = |needle: &[u8]| memchr::memmem::find(bytes, needle).is_some();
    if !mentions(b"\"initial-default\"") && !mentions(b"\"write-default\"") {
        return Vec::new();
    }
    let Ok(raw) = serde_json::from_slice::<Value>(bytes) else { return Vec::new() };
    fn walk(ty: &Value, out: &mut Vec<(i64, String, bool, bool)>) {
        let Some(object) = ty.as_object() else { return };
        for field in object.get("fields").and_then(Value::as_array).into_iter().flatten() {
            let has = |key: &str| field.get(key).is_some_and(|v| !v.is_null());
            if let Some(id) = field.get("id").and_then(Value::as_i64) {
                let name = field.get("name").and_then(Value::as_str).unwrap_or_default().to_string();
                out.push((id, name, has("initial-default"), has("write-default")));
            }
            walk(field.get("type").unwrap_or(&Value::Null), out);
        }
        for key in ["element", "key", "value"] {
            walk(object.get(key).unwrap_or(&Value::Null), out);
        }
    }
    let mut schemas: Vec<&Value> =
        raw.get("schemas").and_then(Value::as_array).map(|a| a.iter().collect()).unwrap_or_default();
    schemas.extend(raw.get("schema"));
    let mut lost = Vec::new();
    for schema in schemas {
        let id = schema.get("schema-id").and_then(Value::as_i64).unwrap_or(0) as i32;
        let parsed = metadata.schema_by_id(id);
        let mut fields = Vec::new();
        walk(schema, &mut fields);
        for (field_id, name, initial, write) in fields {
            let kept = parsed.and_then(|s| s.field_by_id(field_id as i32));
            let missing =
                kept.is_none_or(|f| (initial && f.initial_default.is_none()) || (write && f.write_default.is_none()));
            if (initial || write) && missing {
                let entry = format!("schema {id} column '{name}' (id {field_id})");
                if !lost.contains(&entry) {
                    lost.push(entry);
                }
            }
        }
    }
    lost
}

/// The manifest list `bytes` of a table of format `version`, by iceberg-rust's reader: as that
/// version, else (a table upgraded from v1 or v2 keeps its old lists until a commit writes new
/// ones) as an older one, whose absent fields read as Java reads them (sequence numbers 0, data
/// content, counts unknown). A panic of the reader is an error.
pub fn parse_manifest_list(bytes: &[u8], version: FormatVersion) -> std::result::Result<Vec<ManifestFile>, String> {
    // Its blocks decompressed first, within bounds: apache-avro inflates without one.
    let bytes = &crate::table::iceberg::avro::uncompressed(bytes)?[..];
    let parse = |v| {
        crate::error::without_panic(|| ManifestList::parse_with_version(bytes, v))?
            .map(|list| list.consume_entries().into_iter().collect())
            .map_err(|e| Error::from(e).to_string())
    };
    let first = match parse(version) {
        Ok(list) => return Ok(list),
        Err(e) => e,
    };
    [FormatVersion::V2, FormatVersion::V1].into_iter().filter(|v| *v < version).find_map(|v| parse(v).ok()).ok_or(first)
}

/// The metadata file `bytes` (read from `location`, for messages): the metadata, the stand-ins
/// it needed ([`StandIns`]) and the column defaults iceberg-rust would lose.
/// A panic of iceberg-rust's validation (it subtracts timestamps unchecked: a metadata file with
/// extreme ones overflowed in debug builds) is an error naming the file.
pub fn parse_metadata(bytes: &[u8], location: &str) -> Result<(TableMetadata, StandIns, Vec<String>)> {
    let parse = || -> Result<(TableMetadata, StandIns, Vec<String>)> {
        let (metadata, stand_ins) = match serde_json::from_slice::<TableMetadata>(bytes) {
            Ok(metadata) => (metadata, StandIns::default()),
            Err(first) => parse_with_stand_ins(bytes, location, first)?,
        };
        let lost_defaults = lost_defaults(bytes, &metadata);
        Ok((metadata, stand_ins, lost_defaults))
    };
    crate::error::without_panic(parse).map_err(|panic| {
        Error::new(
            ErrorKind::CorruptMetadata,
            format!("metadata file '{location}' is not valid Iceberg table metadata"),
        )
        .with_context("cause", panic)
    })?
}

/// Parses metadata that serde refused directly (`first`): with stand-ins for column types
/// iceberg-rust lacks, and, if it still fails, with an error that says what is wrong.
fn parse_with_stand_ins(bytes: &[u8], location: &str, first: serde_json::Error) -> Result<(TableMetadata, StandIns)> {
    let invalid = |what: String| {
        Error::new(
            ErrorKind::CorruptMetadata,
            format!("metadata file '{location}' is not valid Iceberg table metadata: {what}"),
        )
    };
    let mut value: serde_json::Value = serde_json::from_slice(bytes)
        .map_err(|_| invalid(format!("it is not valid JSON (line {}, column {})", first.line(), first.column())))?;
    let version = value.get("format-version").and_then(serde_json::Value::as_u64);
    match version {
        Some(1..=3) => {}
        Some(v) => {
            return Err(Error::new(
                ErrorKind::Unsupported,
                format!("metadata file '{location}' is Iceberg format version {v}; versions 1 to 3 are supported"),
            ));
        }
        None => return Err(invalid("it has no numeric format-version".into())),
    }
    if version.is_some_and(|v| v >= 2) {
        fill_upgraded_snapshots(&mut value);
    }
    let stand_ins = StandIns::substitute_metadata(&mut value);
    match serde_json::from_value::<TableMetadata>(value.clone()) {
        Ok(metadata) => Ok((metadata, stand_ins)),
        Err(e) => Err(match StandIns::first_unknown_type(&value) {
            Some((column, ty)) => Error::new(
                ErrorKind::Unsupported,
                format!(
                    "metadata file '{location}': column '{column}' has type '{ty}', which this version does not support"
                ),
            ),
            None => invalid(match missing_field(&value, version.unwrap_or(1)) {
                Some(field) => format!("the required field '{field}' is missing"),
                None => e.to_string(),
            }),
        }),
    }
}

/// Snapshots a table took before it was upgraded from format v1 have no `sequence-number`;
/// Java reads it as 0 (the v1 sequence number), and so does this (iceberg-rust requires it).
fn fill_upgraded_snapshots(metadata: &mut serde_json::Value) {
    let Some(snapshots) = metadata.get_mut("snapshots").and_then(serde_json::Value::as_array_mut) else { return };
    for snapshot in snapshots.iter_mut().filter_map(serde_json::Value::as_object_mut) {
        snapshot.entry("sequence-number").or_insert(serde_json::Value::from(0));
    }
}

/// The first field the spec requires of this format version that the metadata lacks.
fn missing_field(metadata: &serde_json::Value, version: u64) -> Option<&'static str> {
    let required: &[&str] = if version == 1 {
        &["location", "last-updated-ms", "last-column-id"]
    } else {
        &[
            "table-uuid",
            "location",
            "last-sequence-number",
            "last-updated-ms",
            "last-column-id",
            "schemas",
            "current-schema-id",
            "partition-specs",
            "default-spec-id",
            "last-partition-id",
            "sort-orders",
            "default-sort-order-id",
        ]
    };
    // v3 adds `next-row-id` (row lineage), which iceberg-rust, Java and the spec require.
    let v3: &[&str] = if version >= 3 { &["next-row-id"] } else { &[] };
    required.iter().chain(v3).copied().find(|f| metadata.get(*f).is_none())
}

/// A metadata file's JSON: gzip-compressed files (`*.gz.metadata.json`, `*.metadata.json.gz`,
/// as Java writes with `write.metadata.compression-codec=gzip`) are recognised by their magic
/// bytes and decompressed, to at most [`inflate::limit_bytes`] of the file (beyond: refused as a
/// decompression bomb); anything else is returned as it is.
pub(super) fn gunzip_if_compressed(bytes: bytes::Bytes, location: &str) -> Result<bytes::Bytes> {
    if !bytes.starts_with(&[0x1f, 0x8b]) {
        return Ok(bytes);
    }
    let mut json = Vec::new();
    let limit = inflate::limit_bytes(bytes.len());
    inflate::read_capped(flate2::read::GzDecoder::new(&bytes[..]), &mut json, limit).map_err(|stopped| {
        let what = match stopped {
            inflate::Stopped::TooLarge => inflate::bomb_message(bytes.len()),
            inflate::Stopped::Corrupt(e) => format!("is not valid gzip: {e}"),
        };
        Error::new(ErrorKind::CorruptMetadata, format!("metadata file '{location}' {what}"))
    })?;
    Ok(json.into())
}

/// The first column of `schema` (its name) of type `timestamptz_ns`, at any depth.
pub(super) fn nanosecond_timestamptz_column(schema: &iceberg::spec::Schema) -> Option<String> {
    use iceberg::spec::PrimitiveType;
    fn walk(ty: &Type, name: &str) -> Option<String> {
        match ty {
            Type::Primitive(PrimitiveType::TimestamptzNs) => Some(name.to_string()),
            Type::Primitive(_) => None,
            Type::Struct(s) => s.fields().iter().find_map(|f| walk(&f.field_type, &format!("{name}.{}", f.name))),
            Type::List(l) => walk(&l.element_field.field_type, &format!("{name}.element")),
            Type::Map(m) => walk(&m.key_field.field_type, &format!("{name}.key"))
                .or_else(|| walk(&m.value_field.field_type, &format!("{name}.value"))),
        }
    }
    schema.as_struct().fields().iter().find_map(|f| walk(&f.field_type, &f.name))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Spark 4's v3 metadata from the fuzz corpus with `columns` as its schema.
    fn v3_with(columns: serde_json::Value) -> serde_json::Value {
        let mut json: serde_json::Value =
            serde_json::from_slice(include_bytes!("../../../test/fuzz/corpus/metadata/spark4-v3.json")).unwrap();
        json["schemas"][0]["fields"] = columns;
        json["last-column-id"] = serde_json::json!(4);
        json
    }

    #[test]
    fn nanosecond_timestamps_parse_in_every_position() {
        let base = v3_with(serde_json::json!([
            {"id": 1, "name": "i", "required": false, "type": "int"},
            {"id": 2, "name": "tstz", "required": false, "type": "timestamptz_ns",
             "initial-default": "2026-01-01T00:00:00.123456789+00:00"},
            {"id": 3, "name": "l", "required": false,
             "type": {"type": "list", "element-id": 4, "element-required": false, "element": "timestamp_ns"}}]));
        let mut partitioned = base.clone();
        partitioned["partition-specs"] = serde_json::json!([{"spec-id": 0, "fields": [
            {"source-id": 2, "field-id": 1000, "name": "tstz_day", "transform": "day"}]}]);
        partitioned["last-partition-id"] = serde_json::json!(1000);
        let mut v2 = base.clone();
        v2["format-version"] = serde_json::json!(2);
        for metadata in [base, partitioned, v2] {
            let bytes = serde_json::to_vec(&metadata).unwrap();
            let (parsed, stand_ins, _) = parse_metadata(&bytes, "v1.metadata.json").unwrap();
            assert!(stand_ins.is_empty(), "ns timestamps need no stand-in");
            assert_eq!(
                super::nanosecond_timestamptz_column(parsed.current_schema()).as_deref(),
                Some("tstz"),
                "{metadata}"
            );
        }
    }

    #[test]
    fn a_type_v3_does_not_define_yet_is_read_with_a_stand_in() {
        let metadata = v3_with(serde_json::json!([
            {"id": 1, "name": "id", "required": false, "type": "long"},
            {"id": 2, "name": "later", "required": false, "type": "uuid7"}]));
        let bytes = serde_json::to_vec(&metadata).unwrap();
        let (_, stand_ins, _) = parse_metadata(&bytes, "v1.metadata.json").unwrap();
        assert_eq!(stand_ins.describe(), "'later' (uuid7)");
        let mut v2 = metadata.clone();
        v2["format-version"] = serde_json::json!(2);
        let message = parse_metadata(&serde_json::to_vec(&v2).unwrap(), "v1.metadata.json").unwrap_err().to_string();
        assert!(message.contains("column 'later' has type 'uuid7', which this version does not support"), "{message}");
    }

    #[test]
    fn a_v3_file_without_next_row_id_names_it_instead_of_a_serde_message() {
        // iceberg-rust 0.10 requires `next-row-id` of v3 metadata (as the spec and Java do);
        // without it serde's untagged enum said only "data did not match any variant of
        // untagged enum TableMetadataEnum".
        let mut metadata = v3_with(serde_json::json!([
            {"id": 1, "name": "ts", "required": false, "type": "timestamp_ns"}]));
        metadata.as_object_mut().unwrap().remove("next-row-id");
        let bytes = serde_json::to_vec(&metadata).unwrap();
        let message = parse_metadata(&bytes, "v2.metadata.json").unwrap_err().to_string();
        assert!(message.contains("the required field 'next-row-id' is missing"), "{message}");
        assert!(!message.contains("untagged enum"), "{message}");
    }
}
