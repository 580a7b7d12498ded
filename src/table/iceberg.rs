//! Reading an Iceberg table's current state through iceberg-rust: metadata, manifest list,
//! manifests, and the live files of the current snapshot.

use std::sync::Arc;

use futures::StreamExt;
use iceberg::io::FileIO;
use iceberg::spec::{DataContentType, Manifest, ManifestFile, ManifestList, PartitionSpec, TableMetadata, Type};

use super::{DataFile, FileContent, partition};
use crate::error::{Error, ErrorKind, Result};
use crate::runtime;

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
}

impl IcebergTable {
    /// Reads and parses the metadata file at `metadata_location`.
    pub fn load(metadata_location: &str) -> Result<Self> {
        let file_io = FileIO::new_with_fs();
        let bytes = runtime::block_on(read_file(&file_io, metadata_location, "metadata file"))??;
        let metadata: TableMetadata = serde_json::from_slice(&bytes).map_err(|e| {
            Error::new(
                ErrorKind::CorruptMetadata,
                format!("metadata file '{metadata_location}' is not valid Iceberg table metadata: {e}"),
            )
        })?;
        Ok(Self { metadata_location: metadata_location.to_string(), metadata: Arc::new(metadata), file_io })
    }

    /// The manifests of the current snapshot (empty for a table without snapshots).
    pub fn current_manifests(&self) -> Result<Vec<ManifestFile>> {
        let Some(snapshot) = self.metadata.current_snapshot() else {
            return Ok(Vec::new());
        };
        let list_path = snapshot.manifest_list().to_string();
        let bytes = runtime::block_on(read_file(&self.file_io, &list_path, "manifest list"))??;
        let list = ManifestList::parse_with_version(&bytes, self.metadata.format_version()).map_err(|e| {
            Error::new(ErrorKind::CorruptMetadata, format!("manifest list '{list_path}' is corrupt"))
                .with_context("cause", Error::from(e).to_string())
        })?;
        Ok(list.consume_entries().into_iter().collect())
    }

    /// Every live (added or existing) data and delete file of the current snapshot.
    pub fn live_files(&self) -> Result<Vec<DataFile>> {
        let manifests = self.current_manifests()?;
        let metadata = self.metadata.clone();
        let file_io = self.file_io.clone();
        runtime::block_on(async move {
            let mut handles = Vec::with_capacity(manifests.len());
            for manifest in manifests {
                let (metadata, file_io) = (metadata.clone(), file_io.clone());
                handles.push(runtime::spawn(async move { read_manifest(&metadata, &file_io, &manifest).await })?);
            }
            let mut files = Vec::new();
            let mut results = futures::stream::iter(handles).buffered(MANIFEST_CONCURRENCY);
            while let Some(joined) = results.next().await {
                let part = joined.map_err(|e| Error::new(ErrorKind::Io, format!("manifest reader failed: {e}")))??;
                files.extend(part);
            }
            Ok(files)
        })?
    }
}

/// Reads a whole metadata file; `what` names it in errors ("manifest list '…' does not exist").
pub async fn read_file(file_io: &FileIO, path: &str, what: &str) -> Result<bytes::Bytes> {
    let input = file_io.new_input(path)?;
    if !input.exists().await? {
        return Err(Error::new(ErrorKind::NotFound, format!("{what} '{path}' does not exist")));
    }
    input.read().await.map_err(|e| {
        Error::new(ErrorKind::Io, format!("cannot read {what} '{path}'")).with_context("cause", Error::from(e).to_string())
    })
}

async fn read_manifest(metadata: &TableMetadata, file_io: &FileIO, manifest: &ManifestFile) -> Result<Vec<DataFile>> {
    let path = &manifest.manifest_path;
    let bytes = read_file(file_io, path, "manifest").await?;
    let loaded = Manifest::parse_avro(&bytes).map_err(|e| {
        Error::new(ErrorKind::CorruptMetadata, format!("manifest '{path}' cannot be read"))
            .with_context("cause", Error::from(e).to_string())
    })?;
    let spec_id = manifest.partition_spec_id;
    let spec: PartitionSpec = match metadata.partition_spec_by_id(spec_id) {
        Some(spec) => spec.as_ref().clone(),
        None => loaded.metadata().partition_spec().clone(),
    };
    let field_types: Option<Vec<Type>> = spec
        .partition_type(loaded.metadata().schema())
        .ok()
        .map(|t| t.fields().iter().map(|f| f.field_type.as_ref().clone()).collect());
    let mut out = Vec::with_capacity(loaded.entries().len());
    for entry in loaded.entries().iter().filter(|e| e.is_alive()) {
        let file = entry.data_file();
        out.push(DataFile {
            path: file.file_path().to_string(),
            size_bytes: file.file_size_in_bytes(),
            record_count: file.record_count(),
            partition: partition::label(&spec, field_types.as_deref(), file.partition()),
            spec_id,
            content: match file.content_type() {
                DataContentType::Data => FileContent::Data,
                DataContentType::PositionDeletes => FileContent::PositionDeletes,
                DataContentType::EqualityDeletes => FileContent::EqualityDeletes,
            },
        });
    }
    Ok(out)
}
