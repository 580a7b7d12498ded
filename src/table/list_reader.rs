//! A lean reader of Iceberg manifest lists for reachability (expiry, orphans, health).
//!
//! Those read every manifest list of a table's history — thousands of lists, millions of
//! entries when each fast append carries every earlier manifest over — and need only each
//! entry's scalar fields (path, length, spec, content, sequence numbers, adding snapshot,
//! counts). iceberg-rust's reader decodes every entry into a generic Avro value tree, partition
//! summaries included, then deserializes it: most of an expiry's time. This reader walks the
//! Avro container with the file's own writer schema, reads the scalar fields by name and skips
//! the rest (partition summaries: an array with a byte size per block is skipped in one step).
//!
//! It returns `None` for anything it does not handle (another codec, a schema shape it does not
//! expect, encrypted manifests): the caller then uses iceberg-rust's reader. Entries it returns
//! carry no partition summaries, so they are never written back into a new manifest list (the
//! commit paths read lists with iceberg-rust's reader).

use std::collections::HashMap;

use iceberg::spec::{FormatVersion, ManifestContentType, ManifestFile};
use serde_json::Value;

/// An Avro schema, as far as skipping and reading scalars needs.
#[derive(Debug, Clone)]
enum Shape {
    Null,
    Boolean,
    Int,
    Long,
    Float,
    Double,
    Bytes,
    String,
    Fixed(usize),
    Enum,
    Array(Box<Shape>),
    Map(Box<Shape>),
    Union(Vec<Shape>),
    Record(Vec<(String, Shape)>),
}

fn parse_shape(value: &Value, named: &mut HashMap<String, Shape>) -> Option<Shape> {
    Some(match value {
        Value::String(name) => match name.as_str() {
            "null" => Shape::Null,
            "boolean" => Shape::Boolean,
            "int" => Shape::Int,
            "long" => Shape::Long,
            "float" => Shape::Float,
            "double" => Shape::Double,
            "bytes" => Shape::Bytes,
            "string" => Shape::String,
            other => named.get(other).or_else(|| named.get(other.rsplit('.').next()?))?.clone(),
        },
        Value::Array(branches) => {
            Shape::Union(branches.iter().map(|b| parse_shape(b, named)).collect::<Option<Vec<_>>>()?)
        }
        Value::Object(map) => {
            let ty = map.get("type")?;
            let shape = match ty.as_str() {
                Some("record") | Some("error") => {
                    let fields = map.get("fields")?.as_array()?;
                    let mut out = Vec::with_capacity(fields.len());
                    for f in fields {
                        out.push((f.get("name")?.as_str()?.to_string(), parse_shape(f.get("type")?, named)?));
                    }
                    Shape::Record(out)
                }
                Some("array") => Shape::Array(Box::new(parse_shape(map.get("items")?, named)?)),
                Some("map") => Shape::Map(Box::new(parse_shape(map.get("values")?, named)?)),
                Some("fixed") => Shape::Fixed(usize::try_from(map.get("size")?.as_u64()?).ok()?),
                Some("enum") => Shape::Enum,
                // A primitive with attributes (`{"type": "long", "logicalType": …}`) or a nested type.
                _ => parse_shape(ty, named)?,
            };
            if let Some(name) = map.get("name").and_then(Value::as_str)
                && matches!(shape, Shape::Record(_) | Shape::Fixed(_) | Shape::Enum)
            {
                named.insert(name.to_string(), shape.clone());
                if let Some(short) = name.rsplit('.').next() {
                    named.insert(short.to_string(), shape.clone());
                }
            }
            shape
        }
        _ => return None,
    })
}

/// A cursor over Avro binary data.
struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn long(&mut self) -> Option<i64> {
        let mut value: u64 = 0;
        let mut shift = 0;
        loop {
            let byte = *self.data.get(self.pos)?;
            self.pos += 1;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                break;
            }
            shift += 7;
            if shift > 63 {
                return None;
            }
        }
        Some(((value >> 1) as i64) ^ -((value & 1) as i64))
    }

    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let out = self.data.get(self.pos..end)?;
        self.pos = end;
        Some(out)
    }

    fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = usize::try_from(self.long()?).ok()?;
        self.take(n)
    }

    fn skip(&mut self, shape: &Shape) -> Option<()> {
        match shape {
            Shape::Null => {}
            Shape::Boolean => {
                self.take(1)?;
            }
            Shape::Int | Shape::Long | Shape::Enum => {
                self.long()?;
            }
            Shape::Float => {
                self.take(4)?;
            }
            Shape::Double => {
                self.take(8)?;
            }
            Shape::Bytes | Shape::String => {
                self.bytes()?;
            }
            Shape::Fixed(n) => {
                self.take(*n)?;
            }
            Shape::Union(branches) => {
                let i = usize::try_from(self.long()?).ok()?;
                self.skip(branches.get(i)?)?;
            }
            Shape::Record(fields) => {
                for (_, f) in fields {
                    self.skip(f)?;
                }
            }
            Shape::Array(items) => self.skip_blocks(|c| c.skip(items))?,
            Shape::Map(values) => self.skip_blocks(|c| {
                c.bytes()?;
                c.skip(values)
            })?,
        }
        Some(())
    }

    /// Skips array or map blocks; a block with a negative count carries its byte size.
    fn skip_blocks(&mut self, mut item: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        loop {
            let count = self.long()?;
            if count == 0 {
                return Some(());
            }
            if count < 0 {
                let size = usize::try_from(self.long()?).ok()?;
                self.take(size)?;
            } else {
                for _ in 0..count {
                    item(self)?;
                }
            }
        }
    }

    /// A scalar field's value: `Some(None)` for a null union branch.
    fn scalar(&mut self, shape: &Shape) -> Option<Option<Scalar>> {
        Some(match shape {
            Shape::Null => None,
            Shape::Int | Shape::Long | Shape::Enum => Some(Scalar::Long(self.long()?)),
            Shape::String | Shape::Bytes => Some(Scalar::Bytes(self.bytes()?.to_vec())),
            Shape::Union(branches) => {
                let i = usize::try_from(self.long()?).ok()?;
                return self.scalar(branches.get(i)?);
            }
            _ => return None,
        })
    }
}

enum Scalar {
    Long(i64),
    Bytes(Vec<u8>),
}

/// The entries of the manifest list `bytes` (an Avro object container), or `None` when this
/// reader does not handle it (the caller falls back to iceberg-rust's reader).
pub fn read(bytes: &[u8], version: FormatVersion) -> Option<Vec<ManifestFile>> {
    let mut c = Cursor { data: bytes, pos: 0 };
    if c.take(4)? != b"Obj\x01" {
        return None;
    }
    let mut meta: HashMap<String, Vec<u8>> = HashMap::new();
    loop {
        let count = c.long()?;
        if count == 0 {
            break;
        }
        if count < 0 {
            c.long()?;
        }
        for _ in 0..count.unsigned_abs() {
            let key = String::from_utf8(c.bytes()?.to_vec()).ok()?;
            meta.insert(key, c.bytes()?.to_vec());
        }
    }
    let sync = c.take(16)?;
    let schema: Value = serde_json::from_slice(meta.get("avro.schema")?).ok()?;
    let Shape::Record(fields) = parse_shape(&schema, &mut HashMap::new())? else { return None };
    let roles = roles(&fields)?;
    let codec = meta.get("avro.codec").map(|v| String::from_utf8_lossy(v).into_owned()).unwrap_or_default();
    let mut out = Vec::new();
    while c.pos < c.data.len() {
        let count = usize::try_from(c.long()?).ok()?;
        let size = usize::try_from(c.long()?).ok()?;
        let block = c.take(size)?;
        if c.take(16)? != sync {
            return None;
        }
        let data = decompress(&codec, block)?;
        let mut r = Cursor { data: &data, pos: 0 };
        for _ in 0..count {
            out.push(entry(&mut r, &roles, version)?);
        }
        if r.pos != data.len() {
            return None;
        }
    }
    Some(out)
}

fn decompress(codec: &str, block: &[u8]) -> Option<Vec<u8>> {
    use std::io::Read;
    match codec {
        "" | "null" => Some(block.to_vec()),
        "deflate" => {
            let mut out = Vec::with_capacity(block.len() * 4);
            flate2::read::DeflateDecoder::new(block).read_to_end(&mut out).ok()?;
            Some(out)
        }
        "snappy" => {
            // Snappy blocks end with the CRC32 of the uncompressed data (big-endian).
            let (data, crc) = block.split_at(block.len().checked_sub(4)?);
            let out = snap::raw::Decoder::new().decompress_vec(data).ok()?;
            (crc32fast::hash(&out).to_be_bytes() == crc).then_some(out)
        }
        "zstandard" => zstd::stream::decode_all(block).ok(),
        _ => None,
    }
}

/// What an entry field is to this reader, decided once per list from its name.
#[derive(Clone, Copy)]
enum Role {
    Path,
    KeyMetadata,
    Skip,
    Long(usize),
}

/// The integer fields read, by slot; alternative names (v1's `added_data_files_count`) share one.
const LONGS: [&[&str]; 13] = [
    &["manifest_length"],
    &["partition_spec_id"],
    &["content"],
    &["sequence_number"],
    &["min_sequence_number"],
    &["added_snapshot_id"],
    &["added_files_count", "added_data_files_count"],
    &["existing_files_count", "existing_data_files_count"],
    &["deleted_files_count", "deleted_data_files_count"],
    &["added_rows_count"],
    &["existing_rows_count"],
    &["deleted_rows_count"],
    &["first_row_id"],
];

fn roles(fields: &[(String, Shape)]) -> Option<Vec<(Role, &Shape)>> {
    fields
        .iter()
        .map(|(name, shape)| {
            let role = match name.as_str() {
                "manifest_path" => Role::Path,
                "key_metadata" => Role::KeyMetadata,
                "partitions" => Role::Skip,
                other => Role::Long(LONGS.iter().position(|names| names.contains(&other))?),
            };
            Some((role, shape))
        })
        .collect()
}

/// One manifest-list entry.
fn entry(c: &mut Cursor<'_>, roles: &[(Role, &Shape)], version: FormatVersion) -> Option<ManifestFile> {
    let mut longs: [Option<i64>; LONGS.len()] = [None; LONGS.len()];
    let mut path: Option<String> = None;
    let mut key_metadata: Option<Vec<u8>> = None;
    for (role, shape) in roles {
        match role {
            Role::Path => match c.scalar(shape)? {
                Some(Scalar::Bytes(b)) => path = Some(String::from_utf8(b).ok()?),
                _ => return None,
            },
            Role::KeyMetadata => match c.scalar(shape)? {
                Some(Scalar::Bytes(b)) => key_metadata = Some(b),
                None => {}
                _ => return None,
            },
            Role::Skip => c.skip(shape)?,
            Role::Long(slot) => match c.scalar(shape)? {
                Some(Scalar::Long(v)) => longs[*slot] = Some(v),
                None => {}
                _ => return None,
            },
        }
    }
    let count = |slot: usize| longs[slot].and_then(|v| u32::try_from(v).ok());
    let rows = |slot: usize| longs[slot].and_then(|v| u64::try_from(v).ok());
    let v1 = version == FormatVersion::V1;
    Some(ManifestFile {
        manifest_path: path?,
        manifest_length: longs[0]?,
        partition_spec_id: i32::try_from(longs[1]?).ok()?,
        content: match longs[2].unwrap_or(0) {
            0 => ManifestContentType::Data,
            1 => ManifestContentType::Deletes,
            _ => return None,
        },
        sequence_number: if v1 { 0 } else { longs[3].unwrap_or(0) },
        min_sequence_number: if v1 { 0 } else { longs[4].unwrap_or(0) },
        added_snapshot_id: longs[5]?,
        added_files_count: count(6),
        existing_files_count: count(7),
        deleted_files_count: count(8),
        added_rows_count: rows(9),
        existing_rows_count: rows(10),
        deleted_rows_count: rows(11),
        partitions: None,
        key_metadata,
        first_row_id: rows(12),
    })
}

#[cfg(test)]
mod tests {
    use iceberg::io::FileIO;
    use iceberg::spec::{FieldSummary, ManifestList, ManifestListWriter};

    use super::*;

    fn entry(i: i64, content: ManifestContentType, summaries: bool) -> ManifestFile {
        ManifestFile {
            manifest_path: format!("/t/metadata/m{i}-ü.avro"),
            manifest_length: 1000 + i,
            partition_spec_id: (i % 3) as i32,
            content,
            sequence_number: i,
            min_sequence_number: i - 1,
            added_snapshot_id: 10_000 + i,
            added_files_count: Some(i as u32),
            existing_files_count: Some(2),
            deleted_files_count: Some(0),
            added_rows_count: Some(100 * i as u64),
            existing_rows_count: Some(7),
            deleted_rows_count: Some(0),
            partitions: summaries.then(|| {
                vec![FieldSummary {
                    contains_null: i % 2 == 0,
                    contains_nan: Some(false),
                    lower_bound: None,
                    upper_bound: None,
                }]
            }),
            key_metadata: None,
            first_row_id: None,
        }
    }

    /// Lists written by iceberg-rust (v1 and v2, data and delete manifests, with partition
    /// summaries) read the same by this reader as by iceberg-rust's, summaries aside.
    #[test]
    fn reads_what_iceberg_rust_reads() {
        let dir = std::env::temp_dir().join(format!("lakehouse-list-reader-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let io = FileIO::new_with_fs();
        for version in [FormatVersion::V1, FormatVersion::V2] {
            let path = dir.join(format!("list-{version}.avro")).to_string_lossy().into_owned();
            let entries: Vec<ManifestFile> = (1..=300)
                .map(|i| {
                    let deletes = version == FormatVersion::V2 && i % 5 == 0;
                    let mut e =
                        entry(i, if deletes { ManifestContentType::Deletes } else { ManifestContentType::Data }, true);
                    if version == FormatVersion::V1 {
                        (e.sequence_number, e.min_sequence_number) = (0, 0);
                    }
                    e
                })
                .collect();
            crate::runtime::block_on(async {
                let output = io.new_output(&path).unwrap().writer().await.unwrap();
                let mut writer = match version {
                    FormatVersion::V1 => ManifestListWriter::v1(output, 42, Some(41)),
                    _ => ManifestListWriter::v2(output, 42, Some(41), 300),
                };
                writer.add_manifests(entries.into_iter()).unwrap();
                writer.close().await.unwrap();
            })
            .unwrap();
            let bytes = std::fs::read(&path).unwrap();
            let full: Vec<ManifestFile> = ManifestList::parse_with_version(&bytes, version)
                .unwrap()
                .consume_entries()
                .into_iter()
                .map(|mut f| {
                    f.partitions = None;
                    f
                })
                .collect();
            let lean = read(&bytes, version).expect("the lean reader handles iceberg-rust's lists");
            assert_eq!(lean.len(), 300);
            assert_eq!(lean, full, "{version}");
        }
        // Not an Avro container, or truncated: not handled (the caller falls back), never a panic.
        assert!(read(b"not avro", FormatVersion::V2).is_none());
        let bytes = std::fs::read(dir.join(format!("list-{}.avro", FormatVersion::V2))).unwrap();
        for cut in [5, 40, bytes.len() / 2, bytes.len() - 1] {
            assert!(read(&bytes[..cut], FormatVersion::V2).is_none(), "cut at {cut}");
        }
        std::fs::remove_dir_all(dir).unwrap();
    }
}
