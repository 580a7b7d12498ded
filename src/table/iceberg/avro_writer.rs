//! Just enough Avro to write an object container of records already encoded (the lean manifest
//! merge, [`crate::table::iceberg::manifest_merge`], copies each entry's `data_file` bytes as
//! they were written): the header, deflated blocks, and `int`/`long` fields as a writer schema
//! ([`Shape`]) types them. Readers of what it writes: every Avro reader (the format's own rules).

use std::io::Write;

use crate::table::iceberg::avro::{Cursor, Shape};
pub use crate::table::iceberg::avro::{write_bytes, write_long};

/// Uncompressed bytes of records after which a block is closed (Java's Avro writer closes one
/// per 64 KiB by default too).
const BLOCK_BYTES: usize = 64 * 1024;

/// An integer field typed `shape`: `int`, `long`, or a union of one of them with `null` (the
/// null branch for `None`); `None` when the shape cannot hold the value.
pub fn write_integer(out: &mut Vec<u8>, shape: &Shape, value: Option<i64>) -> Option<()> {
    match (shape, value) {
        (Shape::Int, Some(v)) => write_long(out, i64::from(i32::try_from(v).ok()?)),
        (Shape::Long, Some(v)) => write_long(out, v),
        (Shape::Union(branches), _) => {
            let wanted = |b: &Shape| match value {
                None => matches!(b, Shape::Null),
                Some(_) => matches!(b, Shape::Int | Shape::Long),
            };
            let index = branches.iter().position(wanted)?;
            write_long(out, index as i64);
            write_integer(out, &branches[index], value)?;
        }
        (Shape::Null, None) => {}
        _ => return None,
    }
    Some(())
}

/// Re-encodes the datum at `c`, written with schema `from`, as schema `to` (Avro's schema
/// resolution: record fields matched by name, in `to`'s order; a field `to` adds must be
/// nullable and is written null; a field `to` lacks is dropped only when it is null here; union
/// branches matched by kind; `int` read as `long`; `string` and `bytes` alike). `None` for
/// anything else (a value that would be lost, an enum, a numeric promotion to floating point).
pub fn transcode(c: &mut Cursor<'_>, from: &Shape, to: &Shape, out: &mut Vec<u8>) -> Option<()> {
    match (from, to) {
        (Shape::Union(from_branches), _) => {
            let branch = c.branch(from_branches)?;
            transcode(c, branch, to, out)
        }
        (_, Shape::Union(to_branches)) => {
            let index = to_branches.iter().position(|b| same_kind(from, b))?;
            write_long(out, index as i64);
            transcode(c, from, &to_branches[index], out)
        }
        (Shape::Record(from_fields), Shape::Record(to_fields)) => {
            let mut spans: Vec<(&str, &Shape, usize, usize)> = Vec::with_capacity(from_fields.len());
            for (name, shape) in from_fields {
                let start = c.pos;
                c.skip(shape)?;
                spans.push((name.as_str(), shape, start, c.pos));
            }
            for (name, shape, start, end) in &spans {
                if !to_fields.iter().any(|(n, _)| n == name) && !is_null(&c.data[*start..*end], shape) {
                    return None;
                }
            }
            for (name, shape) in to_fields {
                match spans.iter().find(|(n, ..)| n == name) {
                    Some((_, from_shape, start, end)) => {
                        transcode(&mut Cursor::new(&c.data[*start..*end]), from_shape, shape, out)?
                    }
                    None => write_integer(out, shape, None)?,
                }
            }
            Some(())
        }
        (Shape::Array(from_items), Shape::Array(to_items)) => {
            transcode_blocks(c, out, |c, out| transcode(c, from_items, to_items, out))
        }
        (Shape::Map(from_values), Shape::Map(to_values)) => transcode_blocks(c, out, |c, out| {
            write_bytes(out, c.bytes()?);
            transcode(c, from_values, to_values, out)
        }),
        (Shape::Enum, _) | (_, Shape::Enum) => None,
        _ if same_kind(from, to) || matches!((from, to), (Shape::Int, Shape::Long)) => {
            // Same encoding (an `int` is a `long` on the wire): copy the bytes.
            let start = c.pos;
            c.skip(from)?;
            out.extend_from_slice(&c.data[start..c.pos]);
            Some(())
        }
        _ => None,
    }
}

/// Whether the datum `bytes` (of `shape`) is null: a union's null branch, or `null` itself.
fn is_null(bytes: &[u8], shape: &Shape) -> bool {
    match shape {
        Shape::Null => true,
        Shape::Union(branches) => matches!(Cursor::new(bytes).branch(branches), Some(Shape::Null)),
        _ => false,
    }
}

/// Whether a value of `from` is written as `to` unchanged (union branches are chosen by this).
fn same_kind(from: &Shape, to: &Shape) -> bool {
    use Shape::*;
    match (from, to) {
        (Fixed(a), Fixed(b)) => a == b,
        (Int, Long) => true,
        (String | Bytes, String | Bytes) => true,
        _ => std::mem::discriminant(from) == std::mem::discriminant(to),
    }
}

/// An array's or map's blocks re-encoded item by item, as positive-count blocks.
fn transcode_blocks(
    c: &mut Cursor<'_>,
    out: &mut Vec<u8>,
    mut item: impl FnMut(&mut Cursor<'_>, &mut Vec<u8>) -> Option<()>,
) -> Option<()> {
    loop {
        let mut count = c.long()?;
        if count == 0 {
            write_long(out, 0);
            return Some(());
        }
        if count < 0 {
            c.long()?;
            count = count.checked_neg()?;
        }
        write_long(out, count);
        for _ in 0..count {
            item(c, out)?;
        }
    }
}

/// An Avro object container being written with the `deflate` codec: `meta` (the header's
/// metadata, `avro.schema` among it) first, then one block per 64 KiB of records.
pub struct ContainerWriter {
    out: Vec<u8>,
    sync: [u8; 16],
    block: Vec<u8>,
    records: usize,
}

impl ContainerWriter {
    /// A container whose header holds `meta` (any `avro.codec` in it is replaced by `deflate`).
    pub fn new<'m>(meta: impl IntoIterator<Item = (&'m str, &'m [u8])>) -> Self {
        let mut entries: Vec<(&str, &[u8])> = meta.into_iter().filter(|(k, _)| *k != "avro.codec").collect();
        entries.push(("avro.codec", b"deflate"));
        let mut out = b"Obj\x01".to_vec();
        write_long(&mut out, entries.len() as i64);
        for (key, value) in entries {
            write_bytes(&mut out, key.as_bytes());
            write_bytes(&mut out, value);
        }
        write_long(&mut out, 0);
        let sync = *uuid::Uuid::new_v4().as_bytes();
        out.extend_from_slice(&sync);
        ContainerWriter { out, sync, block: Vec::with_capacity(BLOCK_BYTES * 2), records: 0 }
    }

    /// Appends one record, encoded by `encode` into the open block.
    pub fn append(&mut self, encode: impl FnOnce(&mut Vec<u8>) -> Option<()>) -> Option<()> {
        encode(&mut self.block)?;
        self.records += 1;
        if self.block.len() >= BLOCK_BYTES {
            self.close_block()?;
        }
        Some(())
    }

    fn close_block(&mut self) -> Option<()> {
        if self.records == 0 {
            return Some(());
        }
        let mut encoder = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
        encoder.write_all(&self.block).ok()?;
        let compressed = encoder.finish().ok()?;
        write_long(&mut self.out, self.records as i64);
        write_bytes(&mut self.out, &compressed);
        self.out.extend_from_slice(&self.sync);
        self.block.clear();
        self.records = 0;
        Some(())
    }

    /// The whole file.
    pub fn finish(mut self) -> Option<Vec<u8>> {
        self.close_block()?;
        Some(self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::iceberg::avro::Container;

    /// What the writer writes, Avro's reference implementation in Rust (apache-avro) reads:
    /// the header's metadata, and every record with its integer fields as the shapes typed them.
    #[test]
    fn apache_avro_reads_what_the_container_writer_writes() {
        let schema = br#"{"type":"record","name":"r","fields":[{"name":"a","type":"int"},{"name":"b","type":["null","long"]},{"name":"s","type":"string"}]}"#;
        let mut writer = ContainerWriter::new([("avro.schema", &schema[..]), ("k", b"v"), ("avro.codec", b"null")]);
        let (a, b) = (Shape::Int, Shape::Union(vec![Shape::Null, Shape::Long]));
        let rows = 20_000i64;
        for i in 0..rows {
            writer
                .append(|out| {
                    write_integer(out, &a, Some(i - 7))?;
                    write_integer(out, &b, (i % 3 != 0).then_some(i << 40))?;
                    write_bytes(out, format!("row {i}").as_bytes());
                    Some(())
                })
                .unwrap();
        }
        let bytes = writer.finish().unwrap();
        let reader = apache_avro::Reader::new(&bytes[..]).unwrap();
        assert_eq!(reader.user_metadata().get("k").map(Vec::as_slice), Some(&b"v"[..]));
        let mut n = 0i64;
        for value in reader {
            let apache_avro::types::Value::Record(fields) = value.unwrap() else { panic!("not a record") };
            let i = n;
            assert_eq!(fields[0].1, apache_avro::types::Value::Int((i - 7) as i32));
            let want_b = if i % 3 != 0 {
                apache_avro::types::Value::Union(1, Box::new(apache_avro::types::Value::Long(i << 40)))
            } else {
                apache_avro::types::Value::Union(0, Box::new(apache_avro::types::Value::Null))
            };
            assert_eq!(fields[1].1, want_b);
            assert_eq!(fields[2].1, apache_avro::types::Value::String(format!("row {i}")));
            n += 1;
        }
        assert_eq!(n, rows);
        // More than one block, and the lean reader reads it too.
        let mut container = Container::open(&bytes).unwrap();
        let (mut blocks, mut records) = (0, 0);
        container
            .for_each_block(|count, data| {
                let mut c = Cursor::new(data);
                for _ in 0..count {
                    for (_, shape) in &[("a", Shape::Int), ("b", b.clone()), ("s", Shape::String)] {
                        c.skip(shape)?;
                    }
                }
                (blocks, records) = (blocks + 1, records + count);
                (c.pos == data.len()).then_some(())
            })
            .unwrap();
        assert!(blocks > 1);
        assert_eq!(records, rows as usize);
        // A shape that cannot hold the value is refused.
        assert!(write_integer(&mut Vec::new(), &Shape::Int, Some(i64::MAX)).is_none());
        assert!(write_integer(&mut Vec::new(), &Shape::Long, None).is_none());
        assert!(write_integer(&mut Vec::new(), &Shape::String, Some(1)).is_none());
    }

    /// A record re-encoded into a schema with its fields reordered, a union's branches swapped,
    /// `int` read as `long`, a nullable field added and a null one dropped reads back through
    /// apache-avro with every value; a value the target has no field for is refused.
    #[test]
    fn transcode_resolves_by_name_and_refuses_to_drop_a_value() {
        use apache_avro::types::Value as V;
        let nullable_long = Shape::Union(vec![Shape::Null, Shape::Long]);
        let from = Shape::Record(vec![
            ("a".into(), Shape::Int),
            ("b".into(), nullable_long.clone()),
            ("s".into(), Shape::String),
            ("m".into(), Shape::Map(Box::new(Shape::Long))),
            ("arr".into(), Shape::Array(Box::new(Shape::Union(vec![Shape::Null, Shape::String])))),
            ("gone".into(), nullable_long.clone()),
        ]);
        let to = Shape::Record(vec![
            ("s".into(), Shape::String),
            ("b".into(), Shape::Union(vec![Shape::Long, Shape::Null])),
            ("a".into(), Shape::Long),
            ("arr".into(), Shape::Array(Box::new(Shape::Union(vec![Shape::Null, Shape::String])))),
            ("m".into(), Shape::Map(Box::new(Shape::Long))),
            ("added".into(), Shape::Union(vec![Shape::Null, Shape::Int])),
        ]);
        let to_json = br#"{"type":"record","name":"r","fields":[{"name":"s","type":"string"},{"name":"b","type":["long","null"]},{"name":"a","type":"long"},{"name":"arr","type":{"type":"array","items":["null","string"]}},{"name":"m","type":{"type":"map","values":"long"}},{"name":"added","type":["null","int"]}]}"#;
        let encode = |i: i64, gone: Option<i64>| {
            let mut out = Vec::new();
            write_long(&mut out, -i);
            write_integer(&mut out, &nullable_long, (i % 2 == 0).then_some(i * 1000)).unwrap();
            write_bytes(&mut out, format!("s{i}").as_bytes());
            write_long(&mut out, 2);
            for (k, v) in [("x", i), ("y", i + 1)] {
                write_bytes(&mut out, k.as_bytes());
                write_long(&mut out, v);
            }
            write_long(&mut out, 0);
            write_long(&mut out, -2); // a block with its byte size, as Java writes
            let mut items = Vec::new();
            write_long(&mut items, 0);
            write_long(&mut items, 1);
            write_bytes(&mut items, b"t");
            write_long(&mut out, items.len() as i64);
            out.extend_from_slice(&items);
            write_long(&mut out, 0);
            write_integer(&mut out, &nullable_long, gone).unwrap();
            out
        };
        let mut writer = ContainerWriter::new([("avro.schema", &to_json[..])]);
        for i in 0..3i64 {
            let bytes = encode(i, None);
            writer.append(|out| transcode(&mut Cursor::new(&bytes), &from, &to, out)).unwrap();
        }
        let file = writer.finish().unwrap();
        let rows: Vec<V> = apache_avro::Reader::new(&file[..]).unwrap().map(|v| v.unwrap()).collect();
        assert_eq!(rows.len(), 3);
        for (i, row) in rows.iter().enumerate() {
            let i = i as i64;
            let V::Record(fields) = row else { panic!("not a record") };
            let get = |name: &str| fields.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone()).unwrap();
            assert_eq!(get("s"), V::String(format!("s{i}")));
            let b = if i % 2 == 0 { V::Union(0, Box::new(V::Long(i * 1000))) } else { V::Union(1, Box::new(V::Null)) };
            assert_eq!(get("b"), b);
            assert_eq!(get("a"), V::Long(-i));
            let arr = V::Array(vec![V::Union(0, Box::new(V::Null)), V::Union(1, Box::new(V::String("t".into())))]);
            assert_eq!(get("arr"), arr);
            let V::Map(m) = get("m") else { panic!("not a map") };
            assert_eq!((m["x"].clone(), m["y"].clone()), (V::Long(i), V::Long(i + 1)));
            assert_eq!(get("added"), V::Union(0, Box::new(V::Null)));
        }
        let lost = encode(5, Some(42));
        assert!(transcode(&mut Cursor::new(&lost), &from, &to, &mut Vec::new()).is_none());
        // A long cannot be read as an int, nor a null as a long.
        assert!(transcode(&mut Cursor::new(&[2]), &Shape::Long, &Shape::Int, &mut Vec::new()).is_none());
        assert!(transcode(&mut Cursor::new(&[0]), &nullable_long, &Shape::Long, &mut Vec::new()).is_none());
    }
}
