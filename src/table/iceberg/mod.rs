//! Reading an Iceberg table's current state through iceberg-rust: metadata, manifest list,
//! manifests, and the live files of the current snapshot. Parsing the metadata files is
//! [`metadata`]'s; writing a new snapshot (manifests, manifest list, the metadata naming it)
//! [`snapshot_builder`]'s, with [`new_snapshot`]'s pieces; making that metadata current
//! [`commit`]'s.

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
pub mod metadata;
pub mod new_snapshot;
pub mod partition;
pub mod reach;
pub mod snapshot_builder;
pub mod stand_in;
pub mod tallies;

pub use metadata::{parse_manifest_list, parse_metadata};

use metadata::{gunzip_if_compressed, nanosecond_timestamptz_column};
pub use tallies::{CarriedManifest, TalliedManifests, Tallies, has_every_count};

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};
use iceberg::io::FileIO;
use iceberg::spec::{DataFileFormat, Manifest, ManifestFile, PartitionSpec, TableMetadata, Type};

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

    /// Refuses a table whose rows this version cannot rewrite ([`Self::rewrite_refusal`]).
    pub fn require_rewritable(&self) -> Result<()> {
        match self.rewrite_refusal() {
            None => Ok(()),
            Some(why) => Err(Error::new(ErrorKind::Unsupported, why)),
        }
    }

    /// Why this version cannot rewrite the table's rows, or `None`: columns of types held by
    /// stand-ins (`variant`, `geometry`, `geography`, `unknown`) or of `timestamptz_ns` (DuckDB
    /// has no nanosecond timestamp with time zone: reading one would drop its nanoseconds), or
    /// column defaults the parsed metadata lost. The one decision compaction (and the gate's
    /// rewrites) refuse by and the read-only functions report (`compaction_blocked_by`).
    pub fn rewrite_refusal(&self) -> Option<String> {
        if !self.stand_ins.is_empty() {
            // A variant's bytes survive only a copy (DuckDB re-encodes and shreds what it
            // decodes), and a format v3 rewrite must add the row-lineage columns, which a copy of
            // the row groups cannot (docs/iceberg.md, "Variant columns").
            let variant = match self.stand_ins.has_variant() {
                true => {
                    "; a variant's bytes survive only a byte copy of its row groups (DuckDB would re-encode them), \
                     and a format v3 rewrite must add the row-lineage columns, which that copy cannot"
                }
                false => "",
            };
            return Some(format!("compaction cannot rewrite columns of type {}{variant}", self.stand_ins.describe()));
        }
        if let Some(column) = nanosecond_timestamptz_column(self.metadata.current_schema()) {
            return Some(format!(
                "compaction cannot rewrite column '{column}' of type timestamptz_ns (DuckDB has no nanosecond \
                 timestamp with time zone, so its nanoseconds would be lost); profile, health, expiry and orphan \
                 removal work"
            ));
        }
        self.metadata_write_refusal()
    }

    /// Why this version writes no new metadata file for the table (no commit: expiry, manifest
    /// and delete rewrites, compaction), or `None`: column defaults the parse lost
    /// (`metadata::lost_defaults`), which a metadata file written from the parsed metadata would
    /// drop. What the read-only functions report as `cleanup_blocked_by`.
    pub fn metadata_write_refusal(&self) -> Option<String> {
        if self.lost_defaults.is_empty() {
            return None;
        }
        Some(format!(
            "the table's column defaults cannot all be read by this version ({}); nothing that would rewrite the \
             metadata or the data is done, so no default is lost",
            self.lost_defaults.join(", ")
        ))
    }

    /// Refuses when a column default of the metadata file was lost in parsing
    /// ([`Self::metadata_write_refusal`]).
    fn require_defaults_kept(&self) -> Result<()> {
        match self.metadata_write_refusal() {
            None => Ok(()),
            Some(why) => Err(Error::new(ErrorKind::Unsupported, why)),
        }
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
                    if let Some(lean) = lean.filter(|_| version == iceberg::spec::FormatVersion::V1) {
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

    /// The tallies [`IcebergTable::data_tallies`] kept at `small_limit`, if it did.
    pub fn kept_tallies(&self, small_limit: f64) -> Option<TalliedManifests> {
        let kept = self.tallies.lock().ok()?;
        kept.as_ref().filter(|k| k.small_limit == small_limit).map(|k| k.manifests.clone())
    }

    /// For a current snapshot without delete manifests: each manifest with its tally (by the
    /// lean reader, [`IcebergTable::summarize_each`]) at the small-file threshold `small_limit`
    /// (bytes), in manifest-list order; counted once per threshold and kept. `None` when the
    /// snapshot has delete manifests (their tallies depend on the order manifests are read in).
    pub fn data_tallies(&self, small_limit: f64) -> Result<Option<TalliedManifests>> {
        if let Some(kept) = self.kept_tallies(small_limit) {
            return Ok(Some(kept));
        }
        let listed = self.current_manifests()?;
        if listed.iter().any(|m| m.content == iceberg::spec::ManifestContentType::Deletes) {
            return Ok(None);
        }
        let order: std::collections::HashMap<String, usize> =
            listed.iter().enumerate().map(|(i, m)| (m.manifest_path.clone(), i)).collect();
        let mut tallies: Vec<(ManifestFile, ManifestTally)> = Vec::with_capacity(listed.len());
        self.summarize_each(listed, small_limit, Default::default(), &mut |file, tally| tallies.push((file, tally)))?;
        tallies.sort_by_key(|(file, _)| order[&file.manifest_path]);
        let tallies = Arc::new(tallies);
        if let Ok(mut kept) = self.tallies.lock() {
            *kept = Some(Tallies { small_limit, manifests: tallies.clone() });
        }
        Ok(Some(tallies))
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
