//! Just enough Avro to read Iceberg's metadata files lean: an object container's header and
//! blocks, the writer schema as a [`Shape`], and a [`Cursor`] that reads scalars and skips the
//! rest. The lean readers ([`crate::table::iceberg::list_reader`], [`crate::table::iceberg::manifest_reader`]) read only the
//! fields they need by name; every function returns `None` for anything it does not handle, and
//! the caller then falls back to iceberg-rust's full reader.

use std::collections::HashMap;

use serde_json::Value;

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
    /// a block is malformed, its codec unknown, or `each` returns `None`.
    pub fn for_each_block(&mut self, mut each: impl FnMut(usize, &[u8]) -> Option<()>) -> Option<()> {
        let c = &mut self.rest;
        // One inflater and one output buffer for every block of the file: a manifest has a block
        // per few entries, and setting up an inflater (its zeroed window) per block cost more
        // than the inflating.
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
                    inflate(inflater, block, &mut out)?;
                    each(count, &out)?
                }
                codec => each(count, &decompress(codec, block)?)?,
            }
        }
        Some(())
    }
}

/// Inflates the raw deflate stream `block` into `out` (emptied first) with `inflater` (reset
/// first); `None` when the stream is malformed or ends early.
fn inflate(inflater: &mut flate2::Decompress, block: &[u8], out: &mut Vec<u8>) -> Option<()> {
    use flate2::{FlushDecompress, Status};
    inflater.reset(false);
    out.clear();
    out.reserve(block.len() * 4);
    loop {
        let read = usize::try_from(inflater.total_in()).ok()?;
        let written = out.len();
        match inflater.decompress_vec(block.get(read..)?, out, FlushDecompress::Finish).ok()? {
            Status::StreamEnd => return Some(()),
            // Out of room: grow and go on; no progress with room to spare: a truncated stream.
            _ if out.len() == out.capacity() => out.reserve(out.capacity().max(4096)),
            _ if out.len() == written && usize::try_from(inflater.total_in()).ok()? == read => return None,
            _ => {}
        }
    }
}

fn decompress(codec: &str, block: &[u8]) -> Option<Vec<u8>> {
    match codec {
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

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn deflated(data: &[u8]) -> Vec<u8> {
        let mut encoder = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
        encoder.write_all(data).unwrap();
        encoder.finish().unwrap()
    }

    /// One inflater serves block after block (reset between them), whatever their sizes; a
    /// truncated block is refused, and the inflater still serves the next one.
    #[test]
    fn one_inflater_inflates_every_block_and_refuses_a_truncated_one() {
        let blocks: Vec<Vec<u8>> =
            vec![b"manifest entries ".repeat(2000), Vec::new(), (0..=255u8).cycle().take(70_000).collect()];
        let mut inflater = flate2::Decompress::new(false);
        let mut out = Vec::new();
        for block in &blocks {
            inflate(&mut inflater, &deflated(block), &mut out).unwrap();
            assert_eq!(&out, block);
        }
        let whole = deflated(&blocks[2]);
        assert!(inflate(&mut inflater, &whole[..whole.len() / 2], &mut out).is_none());
        inflate(&mut inflater, &deflated(&blocks[0]), &mut out).unwrap();
        assert_eq!(out, blocks[0]);
    }
}
