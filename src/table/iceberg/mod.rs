//! Reading an Iceberg table's current state through iceberg-rust: metadata, manifest list,
//! manifests, and the live files of the current snapshot.

pub mod avro;
pub mod avro_writer;
pub mod commit;
pub mod deletion_vector;
pub mod files;
pub mod history;
pub mod inflate;
pub mod list_reader;
pub mod manifest;
pub mod manifest_merge;
pub mod manifest_reader;
pub mod partition;
pub mod reach;
pub mod stand_in;
pub mod tallies;

pub use tallies::{CarriedManifest, TalliedManifests, Tallies, has_every_count};

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};
use iceberg::io::FileIO;
use iceberg::spec::{
    DataFileFormat, FormatVersion, Manifest, ManifestFile, ManifestList, PartitionSpec, TableMetadata, Type,
};

use crate::error::{Error, ErrorKind, Result};
use crate::runtime;
use crate::table::iceberg::manifest_reader::Views;
use crate::table::iceberg::stand_in::StandIns;
use crate::table::summary::ManifestTally;
use crate::table::{DataFile, PartitionKey};

/// Manifests decoded at once; decoding is CPU-bound and spread over the runtime's workers.
const MANIFEST_CONCURRENCY: usize = 16;

/// An Iceberg table as of one metadata file.
#[derive(Debug, Clone)]
pub struct IcebergTable {
    /// Where the metadata file was read from.
    pub metadata_location: String,
    /// The parsed metadata.
    pub metadata: Arc<TableMetadata>,
    /// File access for manifests and data files.
    pub file_io: FileIO,
    /// Column types held by stand-ins while the metadata is in memory.
    pub stand_ins: Arc<StandIns>,
    /// Column defaults (`initial-default`, `write-default`) the metadata file has and the parsed
    /// metadata lost (`lost_defaults`): no commit may write the metadata without them, and no
    /// rewrite may write NULL where readers see them.
    pub lost_defaults: Arc<Vec<String>>,
    /// The current snapshot's manifests tallied by the lean reader at one small-file threshold
    /// ([`IcebergTable::data_tallies`]), kept for the next caller (the gate profiles, then plans
    /// twice, on one state).
    pub tallies: Arc<std::sync::Mutex<Option<Tallies>>>,
}

impl IcebergTable {
    /// Reads and parses the metadata file at `metadata_location`. Column types iceberg-rust
    /// cannot parse are held by stand-ins ([`StandIns`]); metadata that still does not parse
    /// gets an error naming what is wrong or unsupported.
    pub fn load(metadata_location: &str) -> Result<Self> {
        let file_io = crate::store::file_io_for(metadata_location);
        let bytes = runtime::block_on(files::read_file(&file_io, metadata_location, "metadata file"))??;
        let bytes = gunzip_if_compressed(bytes, metadata_location)?;
        let (metadata, stand_ins, lost_defaults) = parse_metadata(&bytes, metadata_location)?;
        Ok(Self {
            metadata_location: metadata_location.to_string(),
            metadata: Arc::new(metadata),
            file_io,
            stand_ins: Arc::new(stand_ins),
            lost_defaults: Arc::new(lost_defaults),
            tallies: Default::default(),
        })
    }

    /// `metadata` as the JSON of a new metadata file: every column type a stand-in held is put
    /// back, so a commit never changes a schema.
    pub fn to_json(&self, metadata: &TableMetadata) -> Result<Vec<u8>> {
        self.require_defaults_kept()?;
        let serialize =
            |e: serde_json::Error| Error::new(ErrorKind::CorruptMetadata, format!("cannot serialize metadata: {e}"));
        if self.stand_ins.is_empty() {
            return serde_json::to_vec_pretty(metadata).map_err(serialize);
        }
        let mut value = serde_json::to_value(metadata).map_err(serialize)?;
        self.stand_ins.restore(&mut value);
        serde_json::to_vec_pretty(&value).map_err(serialize)
    }

    /// Refuses a table whose rows this version cannot rewrite: columns of types held by
    /// stand-ins (`variant`, `geometry`, `geography`, `unknown`) or of `timestamptz_ns` (DuckDB
    /// has no nanosecond timestamp with time zone: reading one would drop its nanoseconds), or
    /// column defaults the parsed metadata lost.
    pub fn require_rewritable(&self) -> Result<()> {
        if !self.stand_ins.is_empty() {
            return Err(Error::new(
                ErrorKind::Unsupported,
                format!("compaction cannot rewrite columns of type {}", self.stand_ins.describe()),
            ));
        }
        if let Some(column) = nanosecond_timestamptz_column(self.metadata.current_schema()) {
            return Err(Error::new(
                ErrorKind::Unsupported,
                format!(
                    "compaction cannot rewrite column '{column}' of type timestamptz_ns (DuckDB has no nanosecond \
                     timestamp with time zone, so its nanoseconds would be lost); profile, health, expiry and orphan \
                     removal work"
                ),
            ));
        }
        self.require_defaults_kept()
    }

    /// Refuses when a column default of the metadata file was lost in parsing ([`lost_defaults`]).
    fn require_defaults_kept(&self) -> Result<()> {
        if self.lost_defaults.is_empty() {
            return Ok(());
        }
        Err(Error::new(
            ErrorKind::Unsupported,
            format!(
                "the table's column defaults cannot all be read by this version ({}); nothing that would rewrite \
                 the metadata or the data is done, so no default is lost",
                self.lost_defaults.join(", ")
            ),
        ))
    }

    /// The manifests of the current snapshot (empty for a table without snapshots).
    pub fn current_manifests(&self) -> Result<Vec<ManifestFile>> {
        let Some(snapshot) = self.metadata.current_snapshot() else {
            return Ok(Vec::new());
        };
        runtime::block_on(self.manifest_list(snapshot.manifest_list()))?
    }

    /// The entries of the manifest list at `list_path`.
    pub async fn manifest_list(&self, list_path: &str) -> Result<Vec<ManifestFile>> {
        let bytes = files::read_file(&self.file_io, list_path, "manifest list").await?;
        self.parse_manifest_list(&bytes, list_path)
    }

    /// The entries of a manifest list for reachability: read by the lean reader
    /// ([`crate::table::iceberg::list_reader`]), else by iceberg-rust's. Entries carry no partition summaries:
    /// never write them into a new manifest list (use [`IcebergTable::manifest_list`]). Test
    /// builds read every list both ways and fail on any difference.
    pub async fn manifest_list_for_reach(&self, list_path: &str) -> Result<Vec<ManifestFile>> {
        let bytes = files::read_file(&self.file_io, list_path, "manifest list").await?;
        let version = self.metadata.format_version();
        let Some(lean) = crate::table::iceberg::list_reader::read(&bytes, version) else {
            return self.parse_manifest_list(&bytes, list_path);
        };
        #[cfg(feature = "test-hooks")]
        {
            let full: Vec<ManifestFile> = self
                .parse_manifest_list(&bytes, list_path)?
                .into_iter()
                .zip(lean.iter().map(Some).chain(std::iter::repeat(None)))
                .map(|(mut f, lean)| {
                    f.partitions = None;
                    // A v1 list may name field 504-506 `added_files_count` (pyiceberg) where
                    // iceberg-rust's v1 schema expects `added_data_files_count` (Java's v1
                    // name) and reads no count; the lean reader reads by field id, as Java does.
                    if let Some(lean) = lean.filter(|_| version == FormatVersion::V1) {
                        f.added_files_count = f.added_files_count.or(lean.added_files_count);
                        f.existing_files_count = f.existing_files_count.or(lean.existing_files_count);
                        f.deleted_files_count = f.deleted_files_count.or(lean.deleted_files_count);
                    }
                    f
                })
                .collect();
            if full != lean {
                let first = full.iter().zip(&lean).position(|(a, b)| a != b);
                let shown = first.map(|i| format!("entry {i}: iceberg-rust {:?}, lean {:?}", full[i], lean[i]));
                return Err(Error::new(
                    ErrorKind::CorruptMetadata,
                    format!(
                        "the lean manifest-list reader disagrees with iceberg-rust's on '{list_path}' ({})",
                        shown.unwrap_or_else(|| format!("{} entries vs {}", full.len(), lean.len()))
                    ),
                ));
            }
        }
        Ok(lean)
    }

    /// The manifest list `bytes` of this table, read from `list_path` ([`parse_manifest_list`]).
    fn parse_manifest_list(&self, bytes: &[u8], list_path: &str) -> Result<Vec<ManifestFile>> {
        parse_manifest_list(bytes, self.metadata.format_version()).map_err(|cause| {
            Error::new(ErrorKind::CorruptMetadata, format!("manifest list '{list_path}' is corrupt"))
                .with_context("cause", cause)
        })
    }

    /// Every manifest of the current snapshot, decoded (entries inherit sequence numbers and
    /// snapshot ids from the manifest list), in manifest-list order.
    pub fn load_manifests(&self) -> Result<Vec<LoadedManifest>> {
        self.decode_manifests(self.current_manifests()?)
    }

    /// `manifests` (of the current snapshot) decoded, in the order given.
    pub fn decode_manifests(&self, manifests: Vec<ManifestFile>) -> Result<Vec<LoadedManifest>> {
        runtime::block_on(async move {
            let mut handles = Vec::with_capacity(manifests.len());
            for file in manifests {
                let (file_io, metadata) = (self.file_io.clone(), self.metadata.clone());
                handles.push(runtime::spawn(async move { load_manifest(&file_io, &metadata, file).await })?);
            }
            let mut loaded = Vec::with_capacity(handles.len());
            let mut results = futures::stream::iter(handles).buffered(MANIFEST_CONCURRENCY);
            while let Some(joined) = results.next().await {
                loaded.push(joined.map_err(|e| Error::new(ErrorKind::Io, format!("manifest reader failed: {e}")))??);
            }
            Ok(loaded)
        })?
    }

    /// The bytes of `manifests` (of the current snapshot), fetched at most
    /// `MANIFEST_CONCURRENCY` at a time, in the order given.
    pub async fn fetch_manifests(&self, manifests: Vec<ManifestFile>) -> Result<Vec<(ManifestFile, bytes::Bytes)>> {
        let fetches = manifests.into_iter().map(|file| async move {
            let bytes = manifest::fetch(&self.file_io, &file).await?;
            Ok::<_, Error>((file, bytes))
        });
        futures::stream::iter(fetches).buffered(MANIFEST_CONCURRENCY).try_collect().await
    }

    /// The directory new metadata files go to: the current metadata file's, else
    /// `{location}/metadata`.
    pub fn metadata_dir(&self) -> String {
        match self.metadata_location.rsplit_once('/') {
            Some((dir, _)) => dir.to_string(),
            None => format!("{}/metadata", self.metadata.location()),
        }
    }

    /// Every live (added or existing) data and delete file of the current snapshot.
    pub fn live_files(&self) -> Result<Vec<DataFile>> {
        let manifests = self.load_manifests()?;
        let mut files = Vec::new();
        for manifest in &manifests {
            files.extend(self.model_files(manifest));
        }
        Ok(files)
    }

    /// The live files of one manifest in the format-neutral model.
    pub fn model_files(&self, loaded: &LoadedManifest) -> Vec<DataFile> {
        model_files(&self.metadata, loaded)
    }

    /// Streams `manifests` (of the current snapshot) as per-partition figures, each handed to
    /// `add` as soon as its manifest is read (by the lean reader, [`manifest_reader`], else by
    /// iceberg-rust's), at most `MANIFEST_CONCURRENCY` at a time, so memory holds partitions,
    /// not files. `small_limit`: the small-file threshold in bytes; `referenced`: the data files
    /// position deletes name (whose partitions the figures record).
    pub fn summarize_manifests(
        &self,
        manifests: Vec<ManifestFile>,
        small_limit: f64,
        referenced: Arc<HashSet<PathBuf>>,
        add: &mut dyn FnMut(ManifestTally),
    ) -> Result<()> {
        self.summarize_each(manifests, small_limit, referenced, &mut |_, tally| add(tally))
    }

    /// [`IcebergTable::summarize_manifests`], handing each tally to `add` with its manifest's
    /// list entry.
    pub fn summarize_each(
        &self,
        manifests: Vec<ManifestFile>,
        small_limit: f64,
        referenced: Arc<HashSet<PathBuf>>,
        add: &mut dyn FnMut(ManifestFile, ManifestTally),
    ) -> Result<()> {
        let views = Arc::new(Views::default());
        runtime::block_on(async {
            let mut results = futures::stream::iter(manifests)
                .map(|file| {
                    let (file_io, metadata) = (self.file_io.clone(), self.metadata.clone());
                    let (views, referenced) = (views.clone(), referenced.clone());
                    async move {
                        runtime::spawn(async move {
                            let bytes = manifest::fetch(&file_io, &file).await?;
                            let tally =
                                tally_manifest(&bytes, &metadata, file.clone(), &views, small_limit, &referenced)?;
                            Ok::<_, Error>((file, tally))
                        })?
                        .await
                        .map_err(|e| Error::new(ErrorKind::Io, format!("manifest reader failed: {e}")))?
                    }
                })
                .buffer_unordered(MANIFEST_CONCURRENCY);
            while let Some(result) = results.next().await {
                let (file, tally) = result?;
                add(file, tally);
            }
            Ok::<(), Error>(())
        })?
    }
}

/// The figures of one manifest: by the lean reader, else from iceberg-rust's decoding. Test
/// builds do both and fail on any difference.
fn tally_manifest(
    bytes: &[u8],
    metadata: &TableMetadata,
    file: ManifestFile,
    views: &Views,
    small_limit: f64,
    referenced: &HashSet<PathBuf>,
) -> Result<ManifestTally> {
    let full = |file: ManifestFile| -> Result<ManifestTally> {
        let manifest = crate::table::iceberg::manifest::decode_bytes(bytes, metadata, &file)?;
        let files = model_files(metadata, &LoadedManifest { file, manifest });
        Ok(ManifestTally::from_files(&files, small_limit, referenced))
    };
    let Some(lean) =
        crate::table::iceberg::manifest_reader::tally(bytes, metadata, &file, views, small_limit, referenced)
    else {
        return full(file);
    };
    #[cfg(feature = "test-hooks")]
    {
        let path = file.manifest_path.clone();
        if normalized(full(file)?) != normalized(lean.clone()) {
            return Err(Error::new(
                ErrorKind::CorruptMetadata,
                format!("the lean manifest reader disagrees with iceberg-rust's on '{path}'"),
            ));
        }
    }
    Ok(lean)
}

/// A tally with its partitions in a fixed order, for comparing two readers' tallies.
#[cfg(feature = "test-hooks")]
fn normalized(mut tally: ManifestTally) -> ManifestTally {
    tally.partitions.sort_by(|a, b| (&a.partition, &a.key).cmp(&(&b.partition, &b.key)));
    tally
}

/// The live files of one manifest of `metadata`'s table in the format-neutral model.
fn model_files(metadata: &TableMetadata, loaded: &LoadedManifest) -> Vec<DataFile> {
    let spec_id = loaded.file.partition_spec_id;
    let spec: PartitionSpec = match metadata.partition_spec_by_id(spec_id) {
        Some(spec) => spec.as_ref().clone(),
        None => loaded.manifest.metadata().partition_spec().clone(),
    };
    let field_types: Option<Vec<Type>> = spec
        .partition_type(loaded.manifest.metadata().schema())
        .ok()
        .map(|t| t.fields().iter().map(|f| f.field_type.as_ref().clone()).collect());
    let global = partition::is_unpartitioned(&spec);
    loaded
        .manifest
        .entries()
        .iter()
        .filter(|e| e.is_alive())
        .map(|entry| {
            let file = entry.data_file();
            DataFile {
                path: file.file_path().to_string(),
                size_bytes: file.file_size_in_bytes(),
                record_count: file.record_count(),
                partition: partition::label(&spec, field_types.as_deref(), file.partition()),
                spec_id,
                key: PartitionKey { spec_id, values: partition::canonical(file.partition()) },
                global,
                data_sequence_number: entry.sequence_number().unwrap_or(0),
                referenced_data_file: file.referenced_data_file(),
                parquet: file.file_format() == DataFileFormat::Parquet,
                content: file.content_type().into(),
                content_offset: file.content_offset(),
            }
        })
        .collect()
}

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
    required.iter().copied().find(|f| metadata.get(*f).is_none())
}

/// A metadata file's JSON: gzip-compressed files (`*.gz.metadata.json`, `*.metadata.json.gz`,
/// as Java writes with `write.metadata.compression-codec=gzip`) are recognised by their magic
/// bytes and decompressed, to at most [`inflate::limit_bytes`] of the file (beyond: refused as a
/// decompression bomb); anything else is returned as it is.
fn gunzip_if_compressed(bytes: bytes::Bytes, location: &str) -> Result<bytes::Bytes> {
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
fn nanosecond_timestamptz_column(schema: &iceberg::spec::Schema) -> Option<String> {
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

/// The manifest-list entry of `loaded` with the file and row counts a v1 list may lack
/// (null in v1, required from v2) counted from its entries, so it can be named by a new list.
pub fn with_counts(loaded: &LoadedManifest) -> ManifestFile {
    use iceberg::spec::ManifestStatus;
    let mut file = loaded.file.clone();
    let count = |status: ManifestStatus| {
        let entries = loaded.manifest.entries().iter().filter(|e| e.status() == status);
        entries.fold((0u32, 0u64), |(n, rows), e| (n + 1, rows + e.record_count()))
    };
    let (added, existing, deleted) =
        (count(ManifestStatus::Added), count(ManifestStatus::Existing), count(ManifestStatus::Deleted));
    file.added_files_count = file.added_files_count.or(Some(added.0));
    file.added_rows_count = file.added_rows_count.or(Some(added.1));
    file.existing_files_count = file.existing_files_count.or(Some(existing.0));
    file.existing_rows_count = file.existing_rows_count.or(Some(existing.1));
    file.deleted_files_count = file.deleted_files_count.or(Some(deleted.0));
    file.deleted_rows_count = file.deleted_rows_count.or(Some(deleted.1));
    file
}

/// A manifest-list entry with its decoded manifest.
#[derive(Debug, Clone)]
pub struct LoadedManifest {
    /// The manifest-list entry.
    pub file: ManifestFile,
    /// The decoded manifest.
    pub manifest: Manifest,
}

/// Reads the manifest a manifest-list entry of `metadata`'s table names ([`crate::table::iceberg::manifest`]).
pub(crate) async fn load_manifest(
    file_io: &FileIO,
    metadata: &TableMetadata,
    file: ManifestFile,
) -> Result<LoadedManifest> {
    let manifest = crate::table::iceberg::manifest::read(file_io, metadata, &file).await?;
    Ok(LoadedManifest { file, manifest })
}

/// A random positive snapshot id.
pub fn new_snapshot_id() -> i64 {
    (uuid::Uuid::new_v4().as_u64_pair().0 >> 1) as i64
}

/// The fields of a snapshot that a writer chooses.
pub struct NewSnapshot {
    /// Its id ([`new_snapshot_id`]).
    pub snapshot_id: i64,
    /// The snapshot it follows on `main`.
    pub parent: Option<i64>,
    /// The table's next sequence number.
    pub sequence_number: i64,
    /// When it was taken.
    pub timestamp_ms: i64,
    /// Its manifest list.
    pub manifest_list: String,
    /// What it did, with summary figures.
    pub summary: iceberg::spec::Summary,
    /// The schema it was written with.
    pub schema_id: i32,
    /// Format v3: the row ids its manifest list assigned (first, count: [`ListWritten`]).
    pub row_range: Option<(u64, u64)>,
}

/// A manifest writer for `content` at `path`, of `table`'s format version (v1 has no delete
/// manifests), its entries added by `snapshot_id`.
pub fn manifest_writer(
    file_io: &FileIO,
    path: &str,
    snapshot_id: i64,
    schema: iceberg::spec::SchemaRef,
    spec: iceberg::spec::PartitionSpec,
    version: FormatVersion,
    content: iceberg::spec::ManifestContentType,
) -> Result<iceberg::spec::ManifestWriter> {
    let spec = avro_safe_spec(spec)?;
    let builder = iceberg::spec::ManifestWriterBuilder::new(file_io.new_output(path)?, Some(snapshot_id), schema, spec);
    use iceberg::spec::ManifestContentType::{Data, Deletes};
    Ok(match (version, content) {
        (FormatVersion::V1, _) => builder.build_v1(),
        (FormatVersion::V2, Deletes) => builder.build_v2_deletes(),
        (FormatVersion::V2, Data) => builder.build_v2_data(),
        (FormatVersion::V3, Deletes) => builder.build_v3_deletes(),
        (FormatVersion::V3, Data) => builder.build_v3_data(),
    })
}

/// `spec` with its fields named as an Avro schema may name them ([`manifest::avro_safe_name`],
/// as Java writes them): iceberg-rust writes the spec's names into a manifest's Avro schema, and
/// a name like `event-date` made a manifest that apache-avro (our reader, iceberg-rust's) refuses
/// to parse. Readers take the partition fields by `field-id` (Java, pyiceberg, our lean reader)
/// or by the names in the manifest's header (iceberg-rust), which then agree with the schema.
fn avro_safe_spec(spec: iceberg::spec::PartitionSpec) -> Result<iceberg::spec::PartitionSpec> {
    if spec.fields().iter().all(|f| matches!(manifest::avro_safe_name(&f.name), std::borrow::Cow::Borrowed(_))) {
        return Ok(spec);
    }
    let invalid = |e: serde_json::Error| Error::new(ErrorKind::CorruptMetadata, format!("partition spec: {e}"));
    let mut value = serde_json::to_value(&spec).map_err(invalid)?;
    for field in value.get_mut("fields").and_then(serde_json::Value::as_array_mut).into_iter().flatten() {
        if let Some(name) = field.get("name").and_then(serde_json::Value::as_str) {
            let safe = manifest::avro_safe_name(name).into_owned();
            field["name"] = serde_json::Value::from(safe);
        }
    }
    serde_json::from_value(value).map_err(invalid)
}

/// A manifest list written for a new snapshot.
pub struct ListWritten {
    /// Where it is.
    pub path: String,
    /// Format v3: the row ids it assigned to data manifests that had none (the new ones, and
    /// those of a table upgraded from v2) — the snapshot's `first-row-id` (the table's
    /// `next-row-id`) and `added-rows`.
    pub row_range: Option<(u64, u64)>,
}

/// Writes the live entries of `manifests` (of one partition spec and content; one, or several
/// whose entries go together) as a new manifest at `path` for snapshot `snapshot_id`: those
/// `drop` picks as DELETED, the others as EXISTING, each with its data and file sequence numbers,
/// the snapshot that added it and (v3) its first row id; `seen` is told of every live entry and
/// whether it was dropped. Written with the spec and schema of the newest of them (for one, its
/// own). A commit that empties several manifests lists their entries DELETED in one this way —
/// its record of the files it removed, which Java's expiry reads to delete them.
pub async fn rewrite_manifest_dropping(
    file_io: &FileIO,
    path: &str,
    snapshot_id: i64,
    version: FormatVersion,
    manifests: &[&LoadedManifest],
    drop: impl Fn(&iceberg::spec::ManifestEntry) -> bool,
    mut seen: impl FnMut(&iceberg::spec::ManifestEntry, bool),
) -> Result<ManifestFile> {
    let newest = manifests
        .iter()
        .max_by_key(|m| m.file.added_snapshot_id)
        .ok_or_else(|| Error::new(ErrorKind::Io, "no manifest to rewrite (this is a bug, please report it)"))?;
    let mut writer = manifest_writer(
        file_io,
        path,
        snapshot_id,
        newest.manifest.metadata().schema().clone(),
        newest.manifest.metadata().partition_spec().clone(),
        version,
        newest.file.content,
    )?;
    for loaded in manifests {
        for e in loaded.manifest.entries().iter().filter(|e| e.is_alive()) {
            let seq = e.sequence_number().unwrap_or(0);
            let file_seq = e.file_sequence_number.or(Some(seq));
            let dropped = drop(e);
            seen(e, dropped);
            if dropped {
                writer.add_delete_file(e.data_file().clone(), seq, file_seq)?;
            } else {
                let added_by = e.snapshot_id().unwrap_or(loaded.file.added_snapshot_id);
                writer.add_existing_file(e.data_file().clone(), added_by, seq, file_seq)?;
            }
        }
    }
    Ok(writer.write_manifest_file().await?)
}

/// Writes the manifest list of `table`'s next snapshot `snapshot_id` (after the current one, at
/// the next sequence number) naming `manifests`, beside the current metadata file; its path is
/// recorded in `scratch` before anything is written.
pub async fn write_manifest_list(
    table: &IcebergTable,
    snapshot_id: i64,
    manifests: impl IntoIterator<Item = ManifestFile>,
    scratch: &mut Vec<String>,
) -> Result<ListWritten> {
    let metadata = &table.metadata;
    let (parent, sequence_number) = (metadata.current_snapshot_id(), metadata.next_sequence_number());
    let path = format!("{}/snap-{snapshot_id}-1-{}.avro", table.metadata_dir(), uuid::Uuid::new_v4());
    scratch.push(path.clone());
    let output = table.file_io.new_output(&path)?.writer().await?;
    let first_row_id = metadata.next_row_id();
    let mut list = match metadata.format_version() {
        FormatVersion::V1 => iceberg::spec::ManifestListWriter::v1(output, snapshot_id, parent),
        FormatVersion::V2 => iceberg::spec::ManifestListWriter::v2(output, snapshot_id, parent, sequence_number),
        FormatVersion::V3 => {
            iceberg::spec::ManifestListWriter::v3(output, snapshot_id, parent, sequence_number, Some(first_row_id))
        }
    };
    list.add_manifests(manifests.into_iter())?;
    let row_range = list.next_row_id().map(|next| (first_row_id, next - first_row_id));
    list.close().await?;
    Ok(ListWritten { path, row_range })
}

/// `table`'s metadata with a new snapshot on `main` after the current one: the next sequence
/// number, the current schema, taken now ([`add_to_main`]).
pub fn with_main_snapshot(
    table: &IcebergTable,
    snapshot_id: i64,
    manifest_list: ListWritten,
    summary: iceberg::spec::Summary,
    add_order: Option<&iceberg::spec::SortOrder>,
) -> Result<TableMetadata> {
    let metadata = &table.metadata;
    let mut builder = iceberg::spec::TableMetadataBuilder::new_from_metadata(
        metadata.as_ref().clone(),
        Some(table.metadata_location.clone()),
    );
    if let Some(order) = add_order {
        builder = add_sort_order(builder, order)?;
    }
    add_to_main(
        builder,
        NewSnapshot {
            snapshot_id,
            parent: metadata.current_snapshot_id(),
            sequence_number: metadata.next_sequence_number(),
            timestamp_ms: chrono::Utc::now().timestamp_millis(),
            manifest_list: manifest_list.path,
            summary,
            schema_id: metadata.current_schema_id(),
            row_range: manifest_list.row_range,
        },
    )
}

/// Adds `order` to the metadata being built, not as the default (an equal order already there is
/// reused); [`check_added`] then checks it got the id the files were written with.
pub fn add_sort_order(
    builder: iceberg::spec::TableMetadataBuilder,
    order: &iceberg::spec::SortOrder,
) -> Result<iceberg::spec::TableMetadataBuilder> {
    if order.fields.iter().any(|f| f.source_id == 0) {
        return Err(Error::invalid("sort_order names a column missing from the current schema"));
    }
    Ok(builder.add_sort_order(iceberg::spec::SortOrder { order_id: order.order_id, fields: order.fields.clone() })?)
}

/// Checks that `metadata` holds `order` under its id (after [`add_sort_order`]): a concurrent
/// writer that added another order meanwhile makes the commit fail rather than mislabel files.
pub fn check_added(metadata: &TableMetadata, order: &iceberg::spec::SortOrder) -> Result<()> {
    match metadata.sort_order_by_id(order.order_id) {
        Some(found) if found.fields == order.fields => Ok(()),
        _ => Err(Error::conflict(format!(
            "another writer changed the table's sort orders while we compacted (sort order id {} is taken); nothing \
             was committed and the rewritten files were removed; run again",
            order.order_id
        ))),
    }
}

/// Adds `new` to `builder` as the head of the `main` branch and builds the metadata. The
/// branch keeps its retention settings (`min-snapshots-to-keep`, `max-snapshot-age-ms`,
/// `max-ref-age-ms`); every other ref is untouched.
pub fn add_to_main(builder: iceberg::spec::TableMetadataBuilder, new: NewSnapshot) -> Result<TableMetadata> {
    use iceberg::spec::Snapshot;
    let snapshot = Snapshot::builder()
        .with_snapshot_id(new.snapshot_id)
        .with_parent_snapshot_id(new.parent)
        .with_sequence_number(new.sequence_number)
        .with_timestamp_ms(new.timestamp_ms)
        .with_manifest_list(new.manifest_list)
        .with_summary(new.summary)
        .with_schema_id(new.schema_id);
    let snapshot = match new.row_range {
        Some((first_row_id, added_rows)) => snapshot.with_row_range(first_row_id, added_rows).build(),
        None => snapshot.build(),
    };
    Ok(builder.set_branch_snapshot(snapshot, "main")?.build()?.metadata)
}
