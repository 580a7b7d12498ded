//! A lean reader of manifests for the profile (per-partition figures straight from the Avro),
//! reachability (the files named) and the manifest merge (each entry's fields and record bytes,
//! [`crate::table::iceberg::manifest_merge`]).
//!
//! A profile needs, of each live entry, its status, content, path, format, partition tuple,
//! record count, size, data sequence number and (for position deletes) the file it names.
//! iceberg-rust's reader decodes every entry whole — column sizes, value and null counts, lower
//! and upper bounds, split offsets — into a generic Avro value tree, then into structs: most of
//! a profile's time and all of its memory on a table of a million files. This reader walks the
//! entries with the file's own writer schema, reads those fields by name, skips the rest, and
//! counts each data file into its partition's [`PartitionTally`] at once; it decodes a partition
//! tuple only the first time its bytes appear in a manifest.
//!
//! Partition values become the same [`Literal`]s iceberg-rust makes of them (the same typed
//! [`PartitionKey`] and label), for the types whose Avro encoding is unambiguous: boolean, int,
//! long, float, double, date, time, timestamp(tz), string. Anything else — another partition
//! type (decimal, uuid, fixed, binary, nanosecond timestamps), a header whose partition spec is
//! not the table's spec of that id, a codec or schema shape it does not read — returns `None`
//! and the caller reads that manifest with iceberg-rust's reader. Test builds read every
//! manifest both ways and fail on any difference.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use iceberg::spec::{
    FormatVersion, Literal, ManifestFile, PartitionSpec, PrimitiveType, Schema, Struct, StructType, TableMetadata, Type,
};

use crate::store::location_key;
use crate::table::iceberg::avro::{Container, Cursor, Scalar, Shape};
use crate::table::iceberg::partition;
use crate::table::iceberg::stand_in::StandIns;
use crate::table::summary::{ManifestTally, PartitionTally};
use crate::table::{DataFile, FileContent, PartitionKey};

/// How the manifests of one spec and header read: resolved once per distinct header.
#[derive(Debug)]
pub struct PartitionView {
    spec: PartitionSpec,
    /// The partition type iceberg-rust decodes tuples with (the spec bound to the header schema).
    pub(super) partition_type: StructType,
    /// Its field types, for labels.
    field_types: Vec<Type>,
    global: bool,
}

/// Header → [`PartitionView`] resolutions shared by the manifests of one profile.
#[derive(Debug, Default)]
pub struct Views {
    resolved: Mutex<Vec<(ViewKey, Option<Arc<PartitionView>>)>>,
}

type ViewKey = (i32, Option<Vec<u8>>, Option<Vec<u8>>);

impl Views {
    pub(super) fn get(
        &self,
        metadata: &TableMetadata,
        spec_id: i32,
        container: &Container<'_>,
    ) -> Option<Arc<PartitionView>> {
        let (schema, spec) = (container.meta.get("schema").copied(), container.meta.get("partition-spec").copied());
        let mut resolved = self.resolved.lock().ok()?;
        // Manifests of one table share a handful of headers: compare in place, copy only a new one.
        if let Some((_, view)) =
            resolved.iter().find(|((id, a, b), _)| *id == spec_id && a.as_deref() == schema && b.as_deref() == spec)
        {
            return view.clone();
        }
        let key: ViewKey = (spec_id, schema.map(<[u8]>::to_vec), spec.map(<[u8]>::to_vec));
        let view = resolve(metadata, &key).map(Arc::new);
        resolved.push((key, view.clone()));
        view
    }
}

fn resolve(metadata: &TableMetadata, (spec_id, schema, header_spec): &ViewKey) -> Option<PartitionView> {
    let spec = metadata.partition_spec_by_id(*spec_id)?.as_ref().clone();
    let schema: Arc<Schema> = match schema {
        Some(bytes) => {
            let mut value: serde_json::Value = serde_json::from_slice(bytes).ok()?;
            StandIns::default().substitute_schema(&mut value);
            Arc::new(serde_json::from_value(value).ok()?)
        }
        None => crate::table::iceberg::manifest::schema_binding(metadata, &spec).ok()?,
    };
    // iceberg-rust decodes tuples with the header's spec; read lean only when it is the table's.
    if let Some(bytes) = header_spec {
        let fields: Vec<serde_json::Value> = serde_json::from_slice(bytes).ok()?;
        let same = fields.len() == spec.fields().len()
            && fields.iter().zip(spec.fields()).all(|(h, f)| {
                h.get("name").and_then(|v| v.as_str()).is_some_and(|name| {
                    name == f.name || name == crate::table::iceberg::manifest::avro_safe_name(&f.name)
                }) && h.get("source-id").and_then(|v| v.as_i64()) == Some(i64::from(f.source_id))
                    && h.get("transform").and_then(|v| v.as_str()) == Some(f.transform.to_string().as_str())
            });
        if !same {
            return None;
        }
    }
    let partition_type = spec.partition_type(&schema).ok()?;
    let field_types: Vec<Type> = partition_type.fields().iter().map(|f| f.field_type.as_ref().clone()).collect();
    if !field_types.iter().all(|t| matches!(t, Type::Primitive(p) if lean_type(p))) {
        return None;
    }
    let global = partition::is_unpartitioned(&spec);
    Some(PartitionView { spec, partition_type, field_types, global })
}

/// The partition value types this reader decodes.
fn lean_type(ty: &PrimitiveType) -> bool {
    use PrimitiveType::*;
    matches!(ty, Boolean | Int | Long | Float | Double | Date | Time | Timestamp | Timestamptz | String)
}

/// `value` as iceberg-rust's `RawLiteralEnum::try_into(ty)` makes it after Avro's schema
/// resolution (int → long, float → double promote); `None` where iceberg-rust would fail.
fn literal(value: Scalar<'_>, ty: &Type) -> Option<Literal> {
    use PrimitiveType as P;
    let Type::Primitive(ty) = ty else { return None };
    Some(match (value, ty) {
        (Scalar::Boolean(v), P::Boolean) => Literal::bool(v),
        (Scalar::Int(v), P::Int) => Literal::int(v),
        (Scalar::Int(v), P::Date) => Literal::date(v),
        (Scalar::Int(v), P::Long) => Literal::long(i64::from(v)),
        (Scalar::Long(v), P::Long) => Literal::long(v),
        (Scalar::Long(v), P::Time) => Literal::time(v),
        (Scalar::Long(v), P::Timestamp) => Literal::timestamp(v),
        (Scalar::Long(v), P::Timestamptz) => Literal::timestamptz(v),
        (Scalar::Float(v), P::Float) => Literal::float(v),
        (Scalar::Float(v), P::Double) => Literal::double(f64::from(v)),
        (Scalar::Double(v), P::Double) => Literal::double(v),
        (Scalar::String(v), P::String) => Literal::string(v),
        _ => return None,
    })
}

/// The writer's fields of a manifest's `partition` record: name, `field-id` (if written) and
/// shape, in order.
pub(super) type PartitionFields = Vec<(String, Option<i32>, Shape)>;

/// Decodes one partition tuple (the bytes of the entry's `partition` record) in the order of
/// the partition type: a field by its `field-id` when the type has that id (Java and pyiceberg
/// write Avro-safe names, `event_x2Ddate` for `event-date`, and resolve by id), else by name, as
/// Avro schema resolution does; a field the writer lacks is null. iceberg-rust reads the same
/// once [`crate::table::iceberg::manifest`] has renamed the header's fields by id.
pub(super) fn tuple(bytes: &[u8], fields: &PartitionFields, view: &PartitionView) -> Option<Struct> {
    let mut values: Vec<Option<Literal>> = vec![None; view.partition_type.fields().len()];
    let mut c = Cursor::new(bytes);
    let type_fields = view.partition_type.fields();
    for (name, id, shape) in fields {
        let position = id
            .and_then(|id| type_fields.iter().position(|f| f.id == id))
            .or_else(|| type_fields.iter().position(|f| f.name == *name));
        match position {
            None => c.skip(shape)?,
            Some(i) => {
                values[i] = match c.scalar(shape)? {
                    None => None,
                    Some(v) => Some(literal(v, &view.field_types[i])?),
                }
            }
        }
    }
    (c.pos == bytes.len()).then(|| Struct::from_iter(values))
}

/// What a field of an entry (or of its `data_file`) is to this reader.
#[derive(Clone, Copy, PartialEq)]
enum Role {
    Status,
    SnapshotId,
    SequenceNumber,
    FileSequenceNumber,
    DataFile,
    Content,
    Path,
    Format,
    Partition,
    RecordCount,
    Size,
    Referenced,
    ContentOffset,
    FirstRowId,
    Skip,
}

/// A manifest opened for a walk over its entries: the container and the roles of its fields.
pub(super) struct Walker<'a> {
    pub(super) container: Container<'a>,
    top: Vec<(Role, Shape)>,
    inner: Vec<(Role, Shape)>,
}

impl<'a> Walker<'a> {
    pub(super) fn open(bytes: &'a [u8]) -> Option<Self> {
        let container = Container::open(bytes)?;
        let top: Vec<(Role, Shape)> = container
            .fields
            .iter()
            .map(|(name, shape)| {
                let role = match name.as_str() {
                    "status" => Role::Status,
                    "snapshot_id" => Role::SnapshotId,
                    "sequence_number" => Role::SequenceNumber,
                    "file_sequence_number" => Role::FileSequenceNumber,
                    "data_file" => Role::DataFile,
                    _ => Role::Skip,
                };
                (role, shape.clone())
            })
            .collect();
        let Some((_, Shape::Record(data_fields))) = top.iter().find(|(r, _)| *r == Role::DataFile) else {
            return None;
        };
        let inner: Vec<(Role, Shape)> = data_fields
            .iter()
            .map(|(name, shape)| {
                let role = match name.as_str() {
                    "content" => Role::Content,
                    "file_path" => Role::Path,
                    "file_format" => Role::Format,
                    "partition" => Role::Partition,
                    "record_count" => Role::RecordCount,
                    "file_size_in_bytes" => Role::Size,
                    "referenced_data_file" => Role::Referenced,
                    "content_offset" => Role::ContentOffset,
                    "first_row_id" => Role::FirstRowId,
                    _ => Role::Skip,
                };
                (role, shape.clone())
            })
            .collect();
        if !top.iter().any(|(r, _)| *r == Role::Status) || !inner.iter().any(|(r, _)| *r == Role::Path) {
            return None;
        }
        Some(Walker { container, top, inner })
    }

    /// The writer's fields of the `partition` record ([`PartitionFields`]).
    pub(super) fn partition_fields(&self) -> Option<PartitionFields> {
        let (_, Shape::Record(fields)) = self.inner.iter().find(|(r, _)| *r == Role::Partition)? else { return None };
        let ids = crate::table::iceberg::manifest::partition_field_ids(&self.container.schema)
            .filter(|ids| ids.len() == fields.len())
            .unwrap_or_else(|| vec![None; fields.len()]);
        Some(fields.iter().zip(ids).map(|((name, shape), id)| (name.clone(), id, shape.clone())).collect())
    }

    /// Calls `each` with every entry (deleted ones too), checking what every reader needs: a
    /// known status and content, a UTF-8 path, a known file format, non-negative counts.
    pub(super) fn for_each(&mut self, mut each: impl FnMut(&Entry<'_>) -> Option<()>) -> Option<()> {
        let (top, inner) = (&self.top, &self.inner);
        self.container.for_each_block(|count, data| {
            let mut c = Cursor::new(data);
            for _ in 0..count {
                let mut e = Entry::default();
                for (role, shape) in top {
                    match role {
                        Role::Status => e.status = c.integer(shape)??,
                        Role::SnapshotId => e.snapshot_id = c.integer(shape)?,
                        Role::SequenceNumber => e.sequence_number = c.integer(shape)?,
                        Role::FileSequenceNumber => e.file_sequence_number = c.integer(shape)?,
                        Role::DataFile => {
                            let start = c.pos;
                            for (role, shape) in inner {
                                match role {
                                    Role::Content => e.content = c.integer(shape)??,
                                    Role::Path => e.path = std::str::from_utf8(c.text(shape)??).ok()?,
                                    Role::Format => e.format = c.text(shape)??,
                                    Role::Partition => {
                                        let start = c.pos;
                                        c.skip(shape)?;
                                        e.partition = &data[start..c.pos];
                                    }
                                    Role::RecordCount => e.record_count = c.integer(shape)??,
                                    Role::Size => e.size = c.integer(shape)??,
                                    Role::Referenced => e.referenced = c.text(shape)?,
                                    Role::ContentOffset => e.content_offset = c.integer(shape)?,
                                    Role::FirstRowId => e.first_row_id = c.integer(shape)?,
                                    _ => c.skip(shape)?,
                                }
                            }
                            e.data_file = &data[start..c.pos];
                        }
                        _ => c.skip(shape)?,
                    }
                }
                // 0 existing, 1 added, 2 deleted.
                if !(0..=2).contains(&e.status) || !(0..=2).contains(&e.content) {
                    return None;
                }
                if !["avro", "orc", "parquet", "puffin"].iter().any(|f| f.as_bytes().eq_ignore_ascii_case(e.format)) {
                    return None;
                }
                if e.size < 0 || e.record_count < 0 {
                    return None;
                }
                each(&e)?;
            }
            (c.pos == data.len()).then_some(())
        })
    }
}

/// A file a manifest entry names.
#[derive(Debug, Clone, PartialEq)]
pub struct FileRef {
    /// Location as written in the manifest.
    pub path: String,
    /// Size from the manifest entry.
    pub size_bytes: u64,
    /// Data, position deletes or equality deletes.
    pub content: FileContent,
}

/// The files the manifest `bytes` names, as reachability needs them: the path, size and content
/// of each live (ADDED or EXISTING) entry, and the path of each DELETED one. `None`: read it
/// with iceberg-rust's reader instead.
pub fn files(bytes: &[u8]) -> Option<(Vec<FileRef>, Vec<String>)> {
    let mut walker = Walker::open(bytes)?;
    let (mut live, mut deleted) = (Vec::new(), Vec::new());
    walker.for_each(|e| {
        if e.status == 2 {
            deleted.push(e.path.to_string());
        } else {
            live.push(FileRef { path: e.path.to_string(), size_bytes: e.size as u64, content: content(e.content)? });
        }
        Some(())
    })?;
    Some((live, deleted))
}

fn content(value: i64) -> Option<FileContent> {
    Some(match value {
        0 => FileContent::Data,
        1 => FileContent::PositionDeletes,
        2 => FileContent::EqualityDeletes,
        _ => return None,
    })
}

/// The figures of the manifest `bytes`, which `file` (an entry of the current manifest list of
/// `metadata`'s table) names; `small_limit` is the small-file threshold in bytes, `referenced`
/// the location keys of data files position deletes name. `None`: read it with iceberg-rust's
/// reader instead.
pub fn tally(
    bytes: &[u8],
    metadata: &TableMetadata,
    file: &ManifestFile,
    views: &Views,
    small_limit: f64,
    referenced: &HashSet<PathBuf>,
) -> Option<ManifestTally> {
    let mut walker = Walker::open(bytes)?;
    let view = views.get(metadata, file.partition_spec_id, &walker.container)?;
    let partition_fields = walker.partition_fields()?;
    let v1 = metadata.format_version() == FormatVersion::V1;
    let spec_id = file.partition_spec_id;
    let mut out = ManifestTally::default();
    let mut seen: foldhash::HashMap<Vec<u8>, usize> = foldhash::HashMap::default();
    walker.for_each(|e| {
        if e.status == 2 {
            return Some(());
        }
        let (size, records) = (e.size as u64, e.record_count as u64);
        // Inheritance from the manifest-list entry (ADDED is status 1).
        let inherits = crate::table::iceberg::manifest::inherits_sequence_numbers(e.status == 1, file);
        let seq = match e.sequence_number {
            Some(seq) => seq,
            None if inherits => file.sequence_number,
            None => 0,
        };
        let slot = match seen.get(e.partition) {
            Some(slot) => *slot,
            None => {
                let values = tuple(e.partition, &partition_fields, &view)?;
                let key = PartitionKey { spec_id, values: partition::canonical(&values) };
                let label = partition::label(&view.spec, Some(&view.field_types), &values);
                out.partitions.push(PartitionTally::new(label, key));
                seen.insert(e.partition.to_vec(), out.partitions.len() - 1);
                out.partitions.len() - 1
            }
        };
        let content = content(e.content)?;
        if content == FileContent::Data {
            out.partitions[slot].add_file(size, records, seq, small_limit);
            if !referenced.is_empty() {
                let key = location_key(e.path);
                if referenced.contains(&key) {
                    out.named.push((key, out.partitions[slot].key.clone(), seq));
                }
            }
        } else {
            if v1 {
                return None;
            }
            let p = &out.partitions[slot];
            out.deletes.push(DataFile {
                path: e.path.to_string(),
                size_bytes: size,
                record_count: records,
                partition: p.partition.clone(),
                spec_id,
                key: p.key.clone(),
                global: view.global,
                data_sequence_number: seq,
                referenced_data_file: match e.referenced {
                    Some(r) => Some(std::str::from_utf8(r).ok()?.to_string()),
                    None => None,
                },
                content,
                parquet: e.format.eq_ignore_ascii_case(b"parquet"),
                content_offset: e.content_offset,
            });
        }
        Some(())
    })?;
    // A partition seen only in delete entries has no data file here: it is not a row.
    out.partitions.retain(|p| p.files > 0);
    Some(out)
}

/// The fields of one entry this reader keeps.
#[derive(Default)]
pub(super) struct Entry<'a> {
    /// 0 existing, 1 added, 2 deleted.
    pub(super) status: i64,
    pub(super) snapshot_id: Option<i64>,
    pub(super) sequence_number: Option<i64>,
    pub(super) file_sequence_number: Option<i64>,
    /// The `data_file` record's bytes, as written.
    pub(super) data_file: &'a [u8],
    pub(super) content: i64,
    pub(super) path: &'a str,
    format: &'a [u8],
    pub(super) partition: &'a [u8],
    pub(super) record_count: i64,
    pub(super) size: i64,
    referenced: Option<&'a [u8]>,
    pub(super) content_offset: Option<i64>,
    pub(super) first_row_id: Option<i64>,
}

#[cfg(test)]
mod tests {
    use iceberg::io::FileIO;
    use iceberg::spec::{
        DataContentType, DataFileBuilder, DataFileFormat, ManifestContentType, NestedField, SortOrder,
        TableMetadataBuilder, Transform, UnboundPartitionSpec,
    };

    use super::*;
    use crate::table::iceberg::LoadedManifest;
    use crate::table::iceberg::new_snapshot::manifest_writer;

    const SMALL: f64 = 64.0 * 1024.0 * 1024.0;

    fn table(version: FormatVersion, spec: UnboundPartitionSpec) -> TableMetadata {
        use PrimitiveType as P;
        let columns = [
            ("i", P::Int),
            ("l", P::Long),
            ("d", P::Date),
            ("ts", P::Timestamp),
            ("tz", P::Timestamptz),
            ("s", P::String),
            ("b", P::Boolean),
            ("f", P::Float),
            ("x", P::Double),
            ("dec", P::Decimal { precision: 9, scale: 2 }),
        ];
        let fields: Vec<_> = columns
            .into_iter()
            .enumerate()
            .map(|(i, (name, ty))| Arc::new(NestedField::optional(i as i32 + 1, name, Type::Primitive(ty))))
            .collect();
        let schema = Schema::builder().with_fields(fields).build().unwrap();
        TableMetadataBuilder::new(schema, spec, SortOrder::unsorted_order(), "/t".into(), version, Default::default())
            .unwrap()
            .build()
            .unwrap()
            .metadata
    }

    fn spec(fields: &[(i32, &str, Transform)]) -> UnboundPartitionSpec {
        let mut builder = UnboundPartitionSpec::builder().with_spec_id(0);
        for (source, name, transform) in fields {
            builder = builder.add_partition_field(*source, *name, *transform).unwrap();
        }
        builder.build()
    }

    fn file(i: i64, content: DataContentType, partition: Struct) -> iceberg::spec::DataFile {
        let mut b = DataFileBuilder::default();
        b.content(content)
            .file_path(format!("/t/data/f{i}.parquet"))
            .file_format(if i % 7 == 3 { DataFileFormat::Orc } else { DataFileFormat::Parquet })
            .partition(partition)
            .partition_spec_id(0)
            .record_count(10 + i as u64)
            .file_size_in_bytes(((i % 5) as u64 + 1) * 30 * 1024 * 1024);
        if content == DataContentType::PositionDeletes && i % 2 == 0 {
            b.referenced_data_file(Some(format!("/t/data/f{}.parquet", i - 1)));
        }
        if content == DataContentType::EqualityDeletes {
            b.equality_ids(Some(vec![1]));
        }
        b.build().unwrap()
    }

    /// Writes a manifest with iceberg-rust's writer: added, existing and deleted entries.
    fn write(
        dir: &std::path::Path,
        metadata: &TableMetadata,
        content: ManifestContentType,
        tuples: &[Struct],
    ) -> (Vec<u8>, ManifestFile) {
        let path = dir.join(format!("{}.avro", uuid::Uuid::new_v4())).to_string_lossy().into_owned();
        let io = FileIO::new_with_fs();
        let version = metadata.format_version();
        let data_content = match content {
            ManifestContentType::Data => |_: i64| DataContentType::Data,
            ManifestContentType::Deletes => |i: i64| {
                if i % 3 == 0 { DataContentType::EqualityDeletes } else { DataContentType::PositionDeletes }
            },
        };
        let mut list_entry = crate::runtime::block_on(async {
            let mut w = manifest_writer(
                &io,
                &path,
                7,
                metadata.current_schema().clone(),
                metadata.default_partition_spec().as_ref().clone(),
                version,
                content,
            )
            .unwrap();
            for (i, tuple) in tuples.iter().enumerate() {
                let i = i as i64;
                let f = file(i, data_content(i), tuple.clone());
                match i % 4 {
                    0 | 1 => w.add_file(f, if version == FormatVersion::V1 { -1 } else { 40 + i }).unwrap(),
                    2 => w.add_existing_file(f, 5, 3 + i, Some(3 + i)).unwrap(),
                    _ => w.add_delete_file(f, 2, Some(2)).unwrap(),
                }
            }
            w.write_manifest_file().await.unwrap()
        })
        .unwrap();
        list_entry.sequence_number = if version == FormatVersion::V1 { 0 } else { 9 };
        (std::fs::read(&path).unwrap(), list_entry)
    }

    fn both(metadata: &TableMetadata, bytes: &[u8], list: &ManifestFile) -> (Option<ManifestTally>, ManifestTally) {
        let referenced: HashSet<PathBuf> = (0..40).map(|i| location_key(&format!("/t/data/f{i}.parquet"))).collect();
        let lean = tally(bytes, metadata, list, &Views::default(), SMALL, &referenced);
        let manifest = crate::table::iceberg::manifest::decode_bytes(bytes, metadata, list).unwrap();
        let loaded = LoadedManifest { file: list.clone(), manifest };
        let table = crate::table::iceberg::IcebergTable {
            metadata_location: "/t/metadata/v1.metadata.json".into(),
            metadata: Arc::new(metadata.clone()),
            file_io: FileIO::new_with_fs(),
            stand_ins: Default::default(),
            lost_defaults: Default::default(),
            tallies: Default::default(),
        };
        let full = ManifestTally::from_files(&table.model_files(&loaded), SMALL, &referenced);
        let sort = |mut t: ManifestTally| {
            t.partitions.sort_by(|a, b| (&a.partition, &a.key).cmp(&(&b.partition, &b.key)));
            t
        };
        (lean.map(sort), sort(full))
    }

    fn tuples() -> Vec<Struct> {
        (0..24i32)
            .map(|i| {
                let v = |x: Literal| if i % 5 == 4 { None } else { Some(x) };
                Struct::from_iter([
                    v(Literal::int(i % 3 - 1)),
                    v(Literal::long(i64::from(i % 2) << 40)),
                    v(Literal::date(20_000 + i % 2)),
                    v(Literal::timestamp(1_700_000_000_000_000 + i64::from(i % 2))),
                    v(Literal::timestamptz(-5)),
                    v(Literal::string(if i % 2 == 0 { "a/b=c" } else { "ü" })),
                    v(Literal::bool(i % 2 == 0)),
                    v(Literal::float(1.5)),
                    v(Literal::double(-0.25)),
                    v(Literal::date(19_000 + i % 3)),
                    v(Literal::int(i % 4)),
                    v(Literal::string("ab")),
                ])
            })
            .collect()
    }

    /// Manifests iceberg-rust writes (v1, v2 data and deletes; every lean partition type,
    /// nulls, transforms; added, existing and deleted entries) tally the same through the lean
    /// reader as through iceberg-rust's.
    #[test]
    fn tallies_what_iceberg_rust_reads() {
        let dir = std::env::temp_dir().join(format!("lakehouse-manifest-reader-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let fields = [
            (1, "i", Transform::Identity),
            (2, "l", Transform::Identity),
            (3, "d", Transform::Identity),
            (4, "ts", Transform::Identity),
            (5, "tz", Transform::Identity),
            (6, "s", Transform::Identity),
            (7, "b", Transform::Identity),
            (8, "f", Transform::Identity),
            (9, "x", Transform::Identity),
            (4, "ts_day", Transform::Day),
            (6, "s_bucket", Transform::Bucket(4)),
            (6, "s_trunc", Transform::Truncate(2)),
        ];
        for (version, content) in [
            (FormatVersion::V1, ManifestContentType::Data),
            (FormatVersion::V2, ManifestContentType::Data),
            (FormatVersion::V2, ManifestContentType::Deletes),
        ] {
            let metadata = table(version, spec(&fields));
            let (bytes, list) = write(&dir, &metadata, content, &tuples());
            let (lean, full) = both(&metadata, &bytes, &list);
            let lean = lean.unwrap_or_else(|| panic!("{version} {content:?}: the lean reader reads it"));
            assert_eq!(lean, full, "{version} {content:?}");
            // Reachability's view of the same manifest: every entry's path, live or deleted.
            let (live, deleted) = files(&bytes).expect("the lean reader reads it");
            let manifest = crate::table::iceberg::manifest::decode_bytes(&bytes, &metadata, &list).unwrap();
            let want_live: Vec<(String, u64)> = manifest
                .entries()
                .iter()
                .filter(|e| e.is_alive())
                .map(|e| (e.data_file().file_path().to_string(), e.data_file().file_size_in_bytes()))
                .collect();
            let want_deleted: Vec<String> = manifest
                .entries()
                .iter()
                .filter(|e| !e.is_alive())
                .map(|e| e.data_file().file_path().to_string())
                .collect();
            assert_eq!(live.iter().map(|f| (f.path.clone(), f.size_bytes)).collect::<Vec<_>>(), want_live);
            assert_eq!(deleted, want_deleted);
            assert!(!deleted.is_empty() && live.len() > deleted.len());
            match content {
                ManifestContentType::Data => assert!(!lean.partitions.is_empty() && !lean.named.is_empty()),
                ManifestContentType::Deletes => assert!(lean.deletes.len() > 10),
            }
        }
        // Unpartitioned.
        let metadata = table(FormatVersion::V2, spec(&[]));
        let (bytes, list) = write(&dir, &metadata, ManifestContentType::Data, &[Struct::empty(), Struct::empty()]);
        let (lean, full) = both(&metadata, &bytes, &list);
        assert_eq!(lean.unwrap(), full);
        // A decimal partition is left to iceberg-rust's reader.
        let metadata = table(FormatVersion::V2, spec(&[(10, "dec", Transform::Identity)]));
        let tuple = Struct::from_iter([Some(Literal::decimal(-5))]);
        let (bytes, list) = write(&dir, &metadata, ManifestContentType::Data, &[tuple]);
        let (lean, full) = both(&metadata, &bytes, &list);
        assert!(lean.is_none() && full.partitions.len() == 1);
        // Garbage and truncation: not handled, never a panic.
        let views = Views::default();
        assert!(tally(b"not avro", &metadata, &list, &views, SMALL, &HashSet::new()).is_none());
        for cut in [5, 100, bytes.len() / 2, bytes.len() - 1] {
            assert!(tally(&bytes[..cut], &metadata, &list, &views, SMALL, &HashSet::new()).is_none(), "cut {cut}");
        }
        std::fs::remove_dir_all(dir).unwrap();
    }
}
