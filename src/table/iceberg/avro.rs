//! Just enough Avro to read Iceberg's metadata files lean: an object container's header and
//! blocks, the writer schema as a [`Shape`], and a [`Cursor`] that reads scalars and skips the
//! rest. The lean readers ([`crate::table::iceberg::list_reader`], [`crate::table::iceberg::manifest_reader`]) read only the
//! fields they need by name; every function returns `None` for anything it does not handle, and
//! the caller then falls back to iceberg-rust's full reader — which is handed the container
//! [`uncompressed`] first: apache-avro, under it, inflates blocks without a bound.

use std::collections::HashMap;

use serde_json::Value;

use crate::table::iceberg::inflate;

/// An Avro schema, as far as skipping and reading scalars needs.
#[derive(Debug, Clone)]
pub enum Shape {
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
pub struct Cursor<'a> {
    pub data: &'a [u8],
    pub pos: usize,
}

impl<'a> Cursor<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Cursor { data, pos: 0 }
    }

    /// An `int` or `long` (zig-zag, variable length).
    pub fn long(&mut self) -> Option<i64> {
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

    pub fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let out = self.data.get(self.pos..end)?;
        self.pos = end;
        Some(out)
    }

    /// `bytes` or `string`: a length, then the bytes.
    pub fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = usize::try_from(self.long()?).ok()?;
        self.take(n)
    }

    /// The branch a union value takes.
    pub fn branch<'s>(&mut self, branches: &'s [Shape]) -> Option<&'s Shape> {
        branches.get(usize::try_from(self.long()?).ok()?)
    }

    pub fn skip(&mut self, shape: &Shape) -> Option<()> {
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
                let branch = self.branch(branches)?;
                self.skip(branch)?;
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

    /// A scalar field's value: `Some(None)` for a null union branch; `None` for a shape that is
    /// not a scalar.
    pub fn scalar(&mut self, shape: &Shape) -> Option<Option<Scalar<'a>>> {
        Some(match shape {
            Shape::Null => None,
            Shape::Boolean => Some(Scalar::Boolean(match self.take(1)?[0] {
                0 => false,
                1 => true,
                _ => return None,
            })),
            Shape::Int => Some(Scalar::Int(i32::try_from(self.long()?).ok()?)),
            Shape::Long | Shape::Enum => Some(Scalar::Long(self.long()?)),
            Shape::Float => Some(Scalar::Float(f32::from_le_bytes(self.take(4)?.try_into().ok()?))),
            Shape::Double => Some(Scalar::Double(f64::from_le_bytes(self.take(8)?.try_into().ok()?))),
            Shape::String => Some(Scalar::String(std::str::from_utf8(self.bytes()?).ok()?)),
            Shape::Bytes => Some(Scalar::Bytes(self.bytes()?)),
            Shape::Fixed(n) => Some(Scalar::Bytes(self.take(*n)?)),
            Shape::Union(branches) => {
                let branch = self.branch(branches)?;
                return self.scalar(branch);
            }
            Shape::Array(_) | Shape::Map(_) | Shape::Record(_) => return None,
        })
    }

    /// An integer field (`int`, `long`, `enum`, or a union with null): `Some(None)` for null.
    pub fn integer(&mut self, shape: &Shape) -> Option<Option<i64>> {
        match self.scalar(shape)? {
            None => Some(None),
            Some(Scalar::Int(v)) => Some(Some(i64::from(v))),
            Some(Scalar::Long(v)) => Some(Some(v)),
            Some(_) => None,
        }
    }

    /// A string or bytes field: `Some(None)` for null.
    pub fn text(&mut self, shape: &Shape) -> Option<Option<&'a [u8]>> {
        match self.scalar(shape)? {
            None => Some(None),
            Some(Scalar::String(v)) => Some(Some(v.as_bytes())),
            Some(Scalar::Bytes(v)) => Some(Some(v)),
            Some(_) => None,
        }
    }
}

/// One scalar value, as the writer schema typed it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scalar<'a> {
    Boolean(bool),
    Int(i32),
    Long(i64),
    Float(f32),
    Double(f64),
    String(&'a str),
    Bytes(&'a [u8]),
}

/// An Avro object container file: its header metadata, writer schema and data blocks.
pub struct Container<'a> {
    /// The header's metadata map (`avro.schema`, `avro.codec`, and the writer's own keys).
    pub meta: HashMap<String, &'a [u8]>,
    /// The writer schema (`avro.schema`), parsed.
    pub schema: Value,
    /// The writer schema's top-level record fields.
    pub fields: Vec<(String, Shape)>,
    codec: String,
    sync: &'a [u8],
    rest: Cursor<'a>,
}

impl<'a> Container<'a> {
    /// Parses the header of `bytes`; `None` when it is not an Avro container this module reads
    /// (or its schema is not a record).
    pub fn open(bytes: &'a [u8]) -> Option<Self> {
        let mut c = Cursor::new(bytes);
        if c.take(4)? != b"Obj\x01" {
            return None;
        }
        let mut meta: HashMap<String, &'a [u8]> = HashMap::new();
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
                meta.insert(key, c.bytes()?);
            }
        }
        let sync = c.take(16)?;
        let schema: Value = serde_json::from_slice(meta.get("avro.schema")?).ok()?;
        let Shape::Record(fields) = parse_shape(&schema, &mut HashMap::new())? else { return None };
        let codec = meta.get("avro.codec").map(|v| String::from_utf8_lossy(v).into_owned()).unwrap_or_default();
        Some(Container { meta, schema, fields, codec, sync, rest: c })
    }

    /// Calls `each` with every block's record count and decompressed data, in order; `None` when
    /// a block is malformed, its codec unknown, its blocks inflate beyond
    /// [`inflate::limit_bytes`] of the file (the full reader's guard, [`uncompressed`], then
    /// names the file), or `each` returns `None`.
    pub fn for_each_block(&mut self, mut each: impl FnMut(usize, &[u8]) -> Option<()>) -> Option<()> {
        let c = &mut self.rest;
        let mut budget = inflate::limit_bytes(c.data.len());
        // One inflater and one output buffer for every block of the file.
        let mut inflater: Option<flate2::Decompress> = None;
        let mut out = Vec::new();
        while c.pos < c.data.len() {
            let count = usize::try_from(c.long()?).ok()?;
            let size = usize::try_from(c.long()?).ok()?;
            let block = c.take(size)?;
            if c.take(16)? != self.sync {
                return None;
            }
            match self.codec.as_str() {
                "" | "null" => each(count, block)?,
                "deflate" => {
                    let inflater = inflater.get_or_insert_with(|| flate2::Decompress::new(false));
                    inflate::inflate_raw(inflater, block, &mut out, budget).ok()?;
                    budget -= out.len();
                    each(count, &out)?
                }
                codec => {
                    let data = inflate::avro_block(codec, block, budget)?.ok()?;
                    budget -= data.len();
                    each(count, &data)?
                }
            }
        }
        Some(())
    }
}

/// An Avro `long` (or `int`): zig-zag, variable length.
pub fn write_long(out: &mut Vec<u8>, value: i64) {
    let mut v = ((value << 1) ^ (value >> 63)) as u64;
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// Avro `bytes` or `string`: the length, then the bytes.
pub fn write_bytes(out: &mut Vec<u8>, value: &[u8]) {
    write_long(out, value.len() as i64);
    out.extend_from_slice(value);
}

/// The Avro container `bytes` with every block decompressed (its codec `null`), for a reader
/// that would decompress without a bound (apache-avro, under iceberg-rust's manifest and
/// manifest-list readers: a zstd block of 266 KiB that inflated to 8 GiB ended the process).
/// The blocks inflate to at most [`inflate::limit_bytes`] of the file together, and every
/// declared block size is checked against the bytes there (apache-avro allocates a declared size
/// before reading). `bytes` itself when nothing is compressed; an error, for a message after the
/// file's name, when the container is malformed, its codec unknown, or it is a bomb.
pub fn uncompressed(bytes: &[u8]) -> Result<std::borrow::Cow<'_, [u8]>, String> {
    let malformed = |what: &str| format!("is not a well-formed Avro file: {what}");
    let mut c = Cursor::new(bytes);
    if c.take(4) != Some(b"Obj\x01") {
        return Err(malformed("no 'Obj' magic"));
    }
    let header = || "its header is truncated".to_string();
    let mut meta: Vec<(&[u8], &[u8])> = Vec::new();
    loop {
        let count = c.long().ok_or_else(header)?;
        if count == 0 {
            break;
        }
        if count < 0 {
            c.long().ok_or_else(header)?;
        }
        for _ in 0..count.unsigned_abs() {
            meta.push((c.bytes().ok_or_else(header)?, c.bytes().ok_or_else(header)?));
        }
    }
    let sync = c.take(16).ok_or_else(header)?;
    let codec = meta.iter().rev().find(|(k, _)| *k == b"avro.codec").map_or(&b"null"[..], |(_, v)| v);
    let codec = String::from_utf8_lossy(codec).into_owned();
    let compressed = !matches!(codec.as_str(), "" | "null");
    if compressed && !matches!(codec.as_str(), "deflate" | "snappy" | "zstandard") {
        return Err(format!("its codec '{codec}' is not supported (null, deflate, snappy and zstandard are)"));
    }
    let mut out = Vec::new();
    if compressed {
        out.extend_from_slice(b"Obj\x01");
        let kept: Vec<&(&[u8], &[u8])> = meta.iter().filter(|(k, _)| *k != b"avro.codec").collect();
        write_long(&mut out, kept.len() as i64 + 1);
        for (key, value) in kept {
            write_bytes(&mut out, key);
            write_bytes(&mut out, value);
        }
        write_bytes(&mut out, b"avro.codec");
        write_bytes(&mut out, b"null");
        write_long(&mut out, 0);
        out.extend_from_slice(sync);
    }
    let mut budget = inflate::limit_bytes(bytes.len());
    let mut inflater = flate2::Decompress::new(false);
    let mut inflated = Vec::new();
    let mut number = 0usize;
    while c.pos < c.data.len() {
        number += 1;
        let block = |what: &str| malformed(&format!("block {number} {what}"));
        let count = c.long().filter(|n| *n >= 0).ok_or_else(|| block("has no record count"))?;
        let size = c.long().and_then(|n| usize::try_from(n).ok()).ok_or_else(|| block("has no size"))?;
        let data = c
            .take(size)
            .ok_or_else(|| block(&format!("declares {size} bytes where {} are left", c.data.len() - c.pos)))?;
        if c.take(16) != Some(sync) {
            return Err(block("does not end with the file's sync marker"));
        }
        if !compressed {
            continue;
        }
        let stopped = |e: inflate::Stopped| match e {
            inflate::Stopped::TooLarge => inflate::bomb_message(bytes.len()),
            inflate::Stopped::Corrupt(cause) => block(&format!("does not decompress ({codec}): {cause}")),
        };
        let data: &[u8] = if codec == "deflate" {
            inflate::inflate_raw(&mut inflater, data, &mut inflated, budget).map_err(stopped)?;
            &inflated
        } else {
            inflated = inflate::avro_block(&codec, data, budget)
                .unwrap_or(Err(inflate::Stopped::TooLarge))
                .map_err(stopped)?;
            &inflated
        };
        budget -= data.len();
        write_long(&mut out, count);
        write_long(&mut out, data.len() as i64);
        out.extend_from_slice(data);
        out.extend_from_slice(sync);
    }
    Ok(if compressed { std::borrow::Cow::Owned(out) } else { std::borrow::Cow::Borrowed(bytes) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn container(codec: &str, blocks: &[(i64, Vec<u8>)]) -> Vec<u8> {
        let mut out = b"Obj\x01".to_vec();
        write_long(&mut out, 2);
        write_bytes(&mut out, b"avro.schema");
        write_bytes(&mut out, br#"{"type": "record", "name": "r", "fields": [{"name": "a", "type": "long"}]}"#);
        write_bytes(&mut out, b"avro.codec");
        write_bytes(&mut out, codec.as_bytes());
        write_long(&mut out, 0);
        out.extend_from_slice(&[9u8; 16]);
        for (count, block) in blocks {
            write_long(&mut out, *count);
            write_bytes(&mut out, block);
            out.extend_from_slice(&[9u8; 16]);
        }
        out
    }

    fn long(value: i64) -> Vec<u8> {
        let mut out = Vec::new();
        write_long(&mut out, value);
        out
    }

    /// The guard hands apache-avro the same records uncompressed; refuses a bomb (naming it one),
    /// a block that declares more bytes than are left, and a codec it does not know.
    #[test]
    fn uncompressed_containers_read_the_same_and_bombs_are_refused() {
        use apache_avro::types::Value as V;
        let records: Vec<u8> = (0..1000i64).flat_map(long).collect();
        let zstd = container("zstandard", &[(1000, zstd::bulk::compress(&records, 3).unwrap())]);
        let plain = uncompressed(&zstd).unwrap();
        let read: Vec<V> = apache_avro::Reader::new(&plain[..]).unwrap().map(|v| v.unwrap()).collect();
        assert_eq!(read.len(), 1000);
        assert_eq!(read[999], V::Record(vec![("a".into(), V::Long(999))]));
        let null = container("null", &[(1000, records.clone())]);
        assert!(matches!(uncompressed(&null).unwrap(), std::borrow::Cow::Borrowed(_)));

        let bomb = container("zstandard", &[(1, crate::table::iceberg::inflate::zstd_bomb(65_536))]);
        let err = uncompressed(&bomb).unwrap_err();
        assert!(err.contains("refused as a decompression bomb"), "{err}");
        // The lean reader stops too (and falls back to the full reader, which the guard stops).
        assert!(Container::open(&bomb).unwrap().for_each_block(|_, _| Some(())).is_none());

        // A block that declares 512 MiB where 2 KiB are left (apache-avro would allocate it).
        let mut lying = container("null", &[(1000, Vec::new())]);
        lying.truncate(lying.len() - 17);
        lying.extend_from_slice(&long(512 << 20));
        lying.extend_from_slice(&records);
        lying.extend_from_slice(&[9u8; 16]);
        let err = uncompressed(&lying).unwrap_err();
        assert!(err.contains("declares 536870912 bytes"), "{err}");
        let err = uncompressed(&container("bzip2", &[])).unwrap_err();
        assert!(err.contains("codec 'bzip2' is not supported"), "{err}");
    }

    /// The real manifests and manifest lists of the fuzzer's corpus (Impala, Java, Spark 4)
    /// inflate far below the limit's ratio: what the limit leaves as headroom.
    #[test]
    fn real_metadata_inflates_far_below_the_limit() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("test/fuzz/corpus");
        let mut most = 0.0f64;
        for dir in ["manifest", "manifest_list"] {
            for entry in std::fs::read_dir(root.join(dir)).unwrap().flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if name.starts_with("regression-") {
                    continue;
                }
                let bytes = std::fs::read(entry.path()).unwrap();
                let plain = uncompressed(&bytes).unwrap();
                most = most.max(plain.len() as f64 / bytes.len() as f64);
            }
        }
        eprintln!("the corpus inflates at most {most:.1} times");
        assert!(most > 1.0 && most < (crate::table::iceberg::inflate::INFLATE_RATIO / 10) as f64, "{most}");
    }
}
