//! `lakehouse_demo`: a real, fragmented, partitioned Iceberg table for zero-setup runs and
//! benchmarks.
//!
//! The table mirrors the reference flow's telemetry: four `partition_date` partitions, two
//! fragmented by streaming-ingest small files (2026-10-01, 2026-10-02) and two healthy ones of
//! large files. Data files are written by DuckDB (`COPY … TO … (FORMAT parquet, FIELD_IDS …,
//! RETURN_STATS)`) with sizes from the shape below times `scale` (1.0 = real MiB sizes, the
//! default 0.001 = KiB sizes for a demo of a few seconds). The large files are one bulk load
//! (the first snapshot); the small files arrive over the following append snapshots, whose
//! timestamps are spread over the last `history_days` days so snapshot expiry has work. Every
//! snapshot writes its own manifest, manifest list and `vN.metadata.json`, as a streaming
//! writer does, through iceberg-rust's manifest and metadata writers.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use iceberg::io::FileIO;
use iceberg::spec::{
    DataContentType, DataFileBuilder, DataFileFormat, FormatVersion, Literal, ManifestContentType, ManifestFile,
    NestedField, Operation, PrimitiveType, Schema, SortOrder, Struct, Summary, TableMetadata, TableMetadataBuilder,
    Transform, Type, UnboundPartitionSpec,
};

use crate::duck::{HostDb, quote_literal};
use crate::error::{Error, ErrorKind, Result};
use crate::profile::MIB;
use crate::runtime;
use crate::table::iceberg::commit::replace_file;
use crate::table::iceberg::new_snapshot::{
    ListAt, NewSnapshot, add_to_main, list_path, manifest_writer, new_snapshot_id, write_list,
};

/// Options of a demo table.
#[derive(Debug, Clone)]
pub struct DemoOptions {
    /// Directory to create; must not exist or be empty.
    pub path: PathBuf,
    /// Multiplier on the shape's MiB sizes.
    pub scale: f64,
    /// Multiplier on the shape's file counts.
    pub file_multiplier: u32,
    /// Snapshots to write (≥ 2: one bulk load, then streaming appends).
    pub snapshots: u32,
    /// Age of the oldest snapshot, in days.
    pub history_days: u32,
}

impl Default for DemoOptions {
    fn default() -> Self {
        Self { path: PathBuf::new(), scale: 0.001, file_multiplier: 1, snapshots: 16, history_days: 14 }
    }
}

/// What was written.
#[derive(Debug, Clone, PartialEq)]
pub struct DemoReport {
    /// The table directory.
    pub table_location: String,
    /// The current metadata file.
    pub metadata_location: String,
    /// Partitions written.
    pub partitions: u64,
    /// Data files written.
    pub data_files: u64,
    /// Snapshots written.
    pub snapshots: u64,
    /// Bytes of data files.
    pub total_bytes: u64,
    /// Rows written.
    pub record_count: u64,
    /// The reference 64 MiB threshold at this scale.
    pub small_file_threshold_mb: f64,
}

/// One partition of the reference telemetry.
struct Shape {
    date: &'static str,
    small_files: u32,
    small_mb: f64,
    large_files: u32,
    large_mb: f64,
}

/// Two fragmented partitions (ratios 0.92, 0.93) and two healthy ones (0.20, 0.08).
const SHAPES: [Shape; 4] = [
    Shape { date: "2026-10-01", small_files: 48, small_mb: 2.5, large_files: 4, large_mb: 80.0 },
    Shape { date: "2026-10-02", small_files: 65, small_mb: 2.5, large_files: 5, large_mb: 80.0 },
    Shape { date: "2026-10-03", small_files: 4, small_mb: 30.0, large_files: 16, large_mb: 80.0 },
    Shape { date: "2026-10-04", small_files: 2, small_mb: 30.0, large_files: 23, large_mb: 80.0 },
];

/// Compressed bytes per row of the demo schema, and a file's fixed overhead (footer, headers);
/// measured on DuckDB 1.5 with zstd. Used only to choose row counts: sizes are then measured.
const BYTES_PER_ROW: f64 = 25.0;
const FILE_OVERHEAD_BYTES: f64 = 900.0;

const COLUMNS: [(i32, &str, PrimitiveType); 6] = [
    (1, "event_id", PrimitiveType::Long),
    (2, "partition_date", PrimitiveType::Date),
    (3, "user_id", PrimitiveType::Int),
    (4, "event_type", PrimitiveType::String),
    (5, "amount", PrimitiveType::Double),
    (6, "payload", PrimitiveType::String),
];

impl DemoOptions {
    /// Checks ranges and that the target directory is free.
    pub fn validate(&self) -> Result<()> {
        if !self.scale.is_finite() || self.scale <= 0.0 || self.scale > 10.0 {
            return Err(Error::invalid(format!("scale must be a number in (0, 10], got {}", self.scale)));
        }
        if self.snapshots < 2 {
            return Err(Error::invalid(format!("snapshots must be at least 2, got {}", self.snapshots)));
        }
        if self.path.exists() && (!self.path.is_dir() || std::fs::read_dir(&self.path)?.next().is_some()) {
            return Err(Error::invalid(format!(
                "path '{}' already exists and is not an empty directory; choose a new directory",
                self.path.display()
            )));
        }
        Ok(())
    }
}

/// One planned data file.
#[derive(Debug, Clone, PartialEq)]
struct PlannedFile {
    partition: usize,
    rows: u64,
    snapshot: u32,
}

fn rows_for(mb: f64, scale: f64) -> u64 {
    (((mb * scale * MIB) - FILE_OVERHEAD_BYTES) / BYTES_PER_ROW).max(1.0) as u64
}

/// Which file goes into which snapshot: large files in snapshot 0, small files round-robin over
/// the streaming snapshots 1.., so every snapshot adds files.
fn plan(options: &DemoOptions) -> Vec<PlannedFile> {
    let mut files = Vec::new();
    let streaming = options.snapshots - 1;
    let mut next_stream = 0u32;
    for (partition, shape) in SHAPES.iter().enumerate() {
        for _ in 0..shape.large_files * options.file_multiplier {
            files.push(PlannedFile { partition, rows: rows_for(shape.large_mb, options.scale), snapshot: 0 });
        }
        for _ in 0..shape.small_files * options.file_multiplier {
            files.push(PlannedFile {
                partition,
                rows: rows_for(shape.small_mb, options.scale),
                snapshot: 1 + next_stream % streaming,
            });
            next_stream += 1;
        }
    }
    files
}

fn schema() -> Result<Schema> {
    let fields = COLUMNS
        .iter()
        .map(|(id, name, ty)| NestedField::optional(*id, *name, Type::Primitive(ty.clone())).into())
        .collect::<Vec<_>>();
    Ok(Schema::builder().with_schema_id(0).with_fields(fields).build()?)
}

fn days_since_epoch(date: &str) -> Result<i32> {
    let d = chrono::NaiveDate::parse_from_str(date, "%Y-%m-%d").map_err(|e| Error::invalid(e.to_string()))?;
    Ok((d - chrono::NaiveDate::from_ymd_opt(1970, 1, 1).expect("valid epoch")).num_days() as i32)
}

/// Writes one data file with DuckDB; returns (path, rows, bytes) as RETURN_STATS reports them.
fn write_data_file(
    conn: &crate::duck::Nested,
    path: &Path,
    date: &str,
    first_id: u64,
    rows: u64,
) -> Result<(u64, u64)> {
    let field_ids = COLUMNS.iter().map(|(id, name, _)| format!("{name}: {id}")).collect::<Vec<_>>().join(", ");
    let sql = format!(
        "COPY (SELECT (range + {first_id})::BIGINT AS event_id, {date}::DATE AS partition_date, \
         (hash(range + {first_id}) % 100000)::INTEGER AS user_id, \
         (['click','view','purchase','signup','share'])[((range + {first_id}) % 5)::INTEGER + 1] AS event_type, \
         round(random() * 500, 2) AS amount, md5((range + {first_id})::VARCHAR) AS payload \
         FROM range({rows})) TO {target} (FORMAT parquet, COMPRESSION zstd, FIELD_IDS {{{field_ids}}}, RETURN_STATS)",
        date = quote_literal(date),
        target = quote_literal(&path.to_string_lossy()),
    );
    conn.query(&sql)?.copy_stats()
}

/// Writes the demo table described by `options`: one snapshot per step of its history, each
/// with its own data files, manifest, manifest list and metadata file.
pub fn write_demo(options: &DemoOptions, host: &HostDb) -> Result<DemoReport> {
    options.validate()?;
    let table = DemoTable::create(&options.path)?;
    let conn = host.connect()?;
    let planned = plan(options);
    let now_ms = chrono::Utc::now().timestamp_millis();
    let span_ms = i64::from(options.history_days) * 86_400_000;
    let step_ms = span_ms / i64::from(options.snapshots);
    let mut history = History::default();
    for snapshot_index in 0..options.snapshots {
        let timestamp_ms = now_ms - span_ms + i64::from(snapshot_index) * step_ms;
        let files = planned.iter().filter(|f| f.snapshot == snapshot_index);
        let added = table.write_data_files(&conn, files, snapshot_index, &mut history)?;
        history.append(&table, added, timestamp_ms)?;
    }
    let (_, metadata_location) = history.previous.expect("at least two snapshots");
    Ok(DemoReport {
        table_location: table.location_str,
        metadata_location,
        partitions: SHAPES.len() as u64,
        data_files: history.data_files,
        snapshots: u64::from(options.snapshots),
        total_bytes: history.total_bytes,
        record_count: history.record_count,
        small_file_threshold_mb: 64.0 * options.scale,
    })
}

/// The demo table's directories, schema and partition spec.
struct DemoTable {
    location: PathBuf,
    location_str: String,
    metadata_dir: PathBuf,
    schema: std::sync::Arc<Schema>,
    unbound_spec: UnboundPartitionSpec,
    spec: iceberg::spec::PartitionSpec,
    file_io: FileIO,
}

/// What one snapshot adds: its data file entries, their bytes and rows.
struct Added {
    files: Vec<iceberg::spec::DataFile>,
    bytes: u64,
    rows: u64,
}

/// The table's history so far: its manifests (newest first), latest metadata and totals.
#[derive(Default)]
struct History {
    manifests: Vec<ManifestFile>,
    /// The latest metadata and where it was written.
    previous: Option<(TableMetadata, String)>,
    parent: Option<i64>,
    snapshots: u32,
    /// The first `event_id` of the next file.
    next_id: u64,
    data_files: u64,
    total_bytes: u64,
    record_count: u64,
}

impl DemoTable {
    /// Creates the table's directory (`path`) and its `metadata` directory.
    fn create(path: &Path) -> Result<DemoTable> {
        std::fs::create_dir_all(path)?;
        let location = std::fs::canonicalize(path)?;
        let location_str = location.to_string_lossy().into_owned();
        let metadata_dir = location.join("metadata");
        std::fs::create_dir_all(&metadata_dir)?;
        let schema = std::sync::Arc::new(schema()?);
        let unbound_spec = UnboundPartitionSpec::builder()
            .with_spec_id(0)
            .add_partition_field(2, "partition_date", Transform::Identity)?
            .build();
        let spec = unbound_spec.clone().bind(schema.clone())?;
        let file_io = FileIO::new_with_fs();
        Ok(DemoTable { location, location_str, metadata_dir, schema, unbound_spec, spec, file_io })
    }

    /// Writes the data files `files` of snapshot `snapshot_index` with DuckDB, counting them
    /// into `history`'s totals.
    fn write_data_files<'p>(
        &self,
        conn: &crate::duck::Nested,
        files: impl Iterator<Item = &'p PlannedFile>,
        snapshot_index: u32,
        history: &mut History,
    ) -> Result<Added> {
        let mut added = Added { files: Vec::new(), bytes: 0, rows: 0 };
        for file in files {
            let shape = &SHAPES[file.partition];
            let dir = self.location.join("data").join(format!("partition_date={}", shape.date));
            std::fs::create_dir_all(&dir)?;
            let name = format!("{:05}-{}-{}.parquet", history.data_files, snapshot_index, uuid::Uuid::new_v4());
            let path = dir.join(name);
            let (rows, bytes) = write_data_file(conn, &path, shape.date, history.next_id, file.rows)?;
            history.next_id += rows;
            history.data_files += 1;
            added.bytes += bytes;
            added.rows += rows;
            let data_file = DataFileBuilder::default()
                .content(DataContentType::Data)
                .file_path(path.to_string_lossy().into_owned())
                .file_format(DataFileFormat::Parquet)
                .partition(Struct::from_iter([Some(Literal::date(days_since_epoch(shape.date)?))]))
                .partition_spec_id(0)
                .record_count(rows)
                .file_size_in_bytes(bytes)
                .build()
                .map_err(|e| Error::new(ErrorKind::CorruptMetadata, format!("data file entry: {e}")))?;
            added.files.push(data_file);
        }
        history.total_bytes += added.bytes;
        history.record_count += added.rows;
        Ok(added)
    }

    /// The metadata builder of the next snapshot: from `previous`, or a new v2 table's.
    fn metadata_builder(&self, previous: Option<(TableMetadata, String)>) -> Result<TableMetadataBuilder> {
        let properties = HashMap::from([
            ("write.parquet.compression-codec".to_string(), "zstd".to_string()),
            ("write.format.default".to_string(), "parquet".to_string()),
        ]);
        Ok(match previous {
            None => TableMetadataBuilder::new(
                self.schema.as_ref().clone(),
                self.unbound_spec.clone(),
                SortOrder::unsorted_order(),
                self.location_str.clone(),
                FormatVersion::V2,
                properties,
            )?,
            Some((metadata, location)) => TableMetadataBuilder::new_from_metadata(metadata, Some(location)),
        })
    }
}

impl History {
    /// Appends a snapshot taken at `timestamp_ms` adding `added`: writes its manifest (the
    /// earlier ones carried), its manifest list, and `v{N}.metadata.json` with the version hint.
    fn append(&mut self, table: &DemoTable, added: Added, timestamp_ms: i64) -> Result<()> {
        let sequence_number = i64::from(self.snapshots) + 1;
        let snapshot_id = new_snapshot_id();
        let manifest_path = format!("{}/{}-m0.avro", table.metadata_dir.display(), uuid::Uuid::new_v4());
        let manifest_list = list_path(&table.metadata_dir.to_string_lossy(), snapshot_id);
        let added_count = added.files.len();
        let at =
            ListAt { version: FormatVersion::V2, snapshot_id, parent: self.parent, sequence_number, first_row_id: 0 };
        let manifest = runtime::block_on(async {
            let mut writer = manifest_writer(
                &table.file_io,
                &manifest_path,
                snapshot_id,
                table.schema.clone(),
                table.spec.clone(),
                FormatVersion::V2,
                ManifestContentType::Data,
            )?;
            for data_file in added.files {
                writer.add_file(data_file, sequence_number)?;
            }
            let manifest = writer.write_manifest_file().await?;
            let listed = std::iter::once(manifest.clone()).chain(self.manifests.iter().cloned());
            write_list(&table.file_io, &manifest_list, at, listed).await?;
            // The list writer assigned this snapshot's sequence number to the new manifest; later
            // lists carry it over as written.
            let mut manifest = manifest;
            manifest.sequence_number = sequence_number;
            manifest.min_sequence_number = sequence_number;
            Ok::<_, Error>(manifest)
        })??;
        self.manifests.insert(0, manifest);
        let summary = Summary {
            operation: Operation::Append,
            additional_properties: HashMap::from([
                ("added-data-files".to_string(), added_count.to_string()),
                ("added-records".to_string(), added.rows.to_string()),
                ("added-files-size".to_string(), added.bytes.to_string()),
                ("total-data-files".to_string(), self.data_files.to_string()),
                ("total-records".to_string(), self.record_count.to_string()),
                ("total-files-size".to_string(), self.total_bytes.to_string()),
                ("total-delete-files".to_string(), "0".to_string()),
                ("total-position-deletes".to_string(), "0".to_string()),
                ("total-equality-deletes".to_string(), "0".to_string()),
            ]),
        };
        let (parent, schema_id) = (self.parent, table.schema.schema_id());
        let new = NewSnapshot {
            snapshot_id,
            parent,
            sequence_number,
            timestamp_ms,
            manifest_list,
            summary,
            schema_id,
            row_range: None,
        };
        let metadata = add_to_main(table.metadata_builder(self.previous.take())?, new)?;
        let version = self.snapshots + 1;
        let metadata_location = format!("{}/v{version}.metadata.json", table.metadata_dir.display());
        let json = serde_json::to_vec_pretty(&metadata)
            .map_err(|e| Error::new(ErrorKind::CorruptMetadata, format!("cannot serialize metadata: {e}")))?;
        replace_file(Path::new(&metadata_location), &json)?;
        std::fs::write(table.metadata_dir.join("version-hint.text"), version.to_string())?;
        self.previous = Some((metadata, metadata_location));
        self.parent = Some(snapshot_id);
        self.snapshots += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_matches_reference_shape_and_spreads_small_files() {
        let options = DemoOptions { snapshots: 5, ..Default::default() };
        let files = plan(&options);
        assert_eq!(files.len(), 52 + 70 + 20 + 25);
        assert_eq!(files.iter().filter(|f| f.snapshot == 0).count(), 4 + 5 + 16 + 23);
        for snapshot in 1..5 {
            assert!(files.iter().any(|f| f.snapshot == snapshot), "snapshot {snapshot} adds files");
        }
        let doubled = plan(&DemoOptions { file_multiplier: 2, ..options });
        assert_eq!(doubled.len(), 2 * 167);
    }

    #[test]
    fn row_counts_follow_scale() {
        assert_eq!(rows_for(0.0001, 0.001), 1);
        assert!(rows_for(80.0, 1.0) > 3_000_000);
        assert!(rows_for(2.5, 0.001) < rows_for(80.0, 0.001));
    }

    #[test]
    fn invalid_options_are_refused() {
        let bad = [
            DemoOptions { scale: -1.0, ..Default::default() },
            DemoOptions { scale: f64::NAN, ..Default::default() },
            DemoOptions { snapshots: 1, ..Default::default() },
        ];
        for options in bad {
            assert!(options.validate().is_err(), "{options:?}");
        }
    }

    #[test]
    fn epoch_days() {
        assert_eq!(days_since_epoch("1970-01-02").unwrap(), 1);
        assert!(days_since_epoch("2026-13-01").is_err());
    }
}
