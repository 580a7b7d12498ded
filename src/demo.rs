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
    DataContentType, DataFileBuilder, DataFileFormat, FormatVersion, Literal, ManifestFile, ManifestListWriter,
    ManifestWriterBuilder, NestedField, Operation, PrimitiveType, Schema, SortOrder, Struct, Summary, TableMetadata,
    TableMetadataBuilder, Transform, Type, UnboundPartitionSpec,
};

use crate::duck::{HostDb, quote_literal};
use crate::error::{Error, ErrorKind, Result};
use crate::profile::MIB;
use crate::runtime;
use crate::table::iceberg::commit::replace_file;
use crate::table::iceberg::new_snapshot::{NewSnapshot, add_to_main, new_snapshot_id};

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

/// Writes the demo table described by `options`.
pub fn write_demo(options: &DemoOptions, host: &HostDb) -> Result<DemoReport> {
    options.validate()?;
    std::fs::create_dir_all(&options.path)?;
    let location = std::fs::canonicalize(&options.path)?;
    let location_str = location.to_string_lossy().into_owned();
    let metadata_dir = location.join("metadata");
    std::fs::create_dir_all(&metadata_dir)?;

    let schema = std::sync::Arc::new(schema()?);
    let unbound_spec = UnboundPartitionSpec::builder()
        .with_spec_id(0)
        .add_partition_field(2, "partition_date", Transform::Identity)?
        .build();
    let spec = unbound_spec.clone().bind(schema.clone())?;
    let properties = HashMap::from([
        ("write.parquet.compression-codec".to_string(), "zstd".to_string()),
        ("write.format.default".to_string(), "parquet".to_string()),
    ]);

    let conn = host.connect()?;
    let file_io = FileIO::new_with_fs();
    let planned = plan(options);
    let now_ms = chrono::Utc::now().timestamp_millis();
    let span_ms = i64::from(options.history_days) * 86_400_000;
    let step_ms = span_ms / i64::from(options.snapshots);
    let mut manifests: Vec<ManifestFile> = Vec::new();
    let mut previous: Option<(TableMetadata, String)> = None;
    let mut parent: Option<i64> = None;
    let mut next_id = 0u64;
    let (mut data_files, mut total_bytes, mut record_count) = (0u64, 0u64, 0u64);

    for snapshot_index in 0..options.snapshots {
        let sequence_number = i64::from(snapshot_index) + 1;
        let snapshot_id = new_snapshot_id();
        let timestamp_ms = now_ms - span_ms + i64::from(snapshot_index) * step_ms;
        let mut added_files = Vec::new();
        let (mut added_bytes, mut added_rows) = (0u64, 0u64);
        for file in planned.iter().filter(|f| f.snapshot == snapshot_index) {
            let shape = &SHAPES[file.partition];
            let dir = location.join("data").join(format!("partition_date={}", shape.date));
            std::fs::create_dir_all(&dir)?;
            let path = dir.join(format!("{:05}-{}-{}.parquet", data_files, snapshot_index, uuid::Uuid::new_v4()));
            let (rows, bytes) = write_data_file(&conn, &path, shape.date, next_id, file.rows)?;
            next_id += rows;
            data_files += 1;
            added_bytes += bytes;
            added_rows += rows;
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
            added_files.push(data_file);
        }
        total_bytes += added_bytes;
        record_count += added_rows;

        let manifest_path = format!("{}/{}-m0.avro", metadata_dir.display(), uuid::Uuid::new_v4());
        let manifest_list_path =
            format!("{}/snap-{snapshot_id}-1-{}.avro", metadata_dir.display(), uuid::Uuid::new_v4());
        let added_count = added_files.len();
        let manifest = runtime::block_on(async {
            let mut writer = ManifestWriterBuilder::new(
                file_io.new_output(&manifest_path)?,
                Some(snapshot_id),
                schema.clone(),
                spec.clone(),
            )
            .build_v2_data();
            for data_file in added_files {
                writer.add_file(data_file, sequence_number)?;
            }
            let manifest = writer.write_manifest_file().await?;
            let mut list = ManifestListWriter::v2(
                file_io.new_output(&manifest_list_path)?.writer().await?,
                snapshot_id,
                parent,
                sequence_number,
            );
            list.add_manifests(std::iter::once(manifest.clone()).chain(manifests.iter().cloned()))?;
            list.close().await?;
            // The list writer assigned this snapshot's sequence number to the new manifest; later
            // lists carry it over as written.
            let mut manifest = manifest;
            manifest.sequence_number = sequence_number;
            manifest.min_sequence_number = sequence_number;
            Ok::<_, iceberg::Error>(manifest)
        })??;
        manifests.insert(0, manifest);

        let summary = Summary {
            operation: Operation::Append,
            additional_properties: HashMap::from([
                ("added-data-files".to_string(), added_count.to_string()),
                ("added-records".to_string(), added_rows.to_string()),
                ("added-files-size".to_string(), added_bytes.to_string()),
                ("total-data-files".to_string(), data_files.to_string()),
                ("total-records".to_string(), record_count.to_string()),
                ("total-files-size".to_string(), total_bytes.to_string()),
                ("total-delete-files".to_string(), "0".to_string()),
                ("total-position-deletes".to_string(), "0".to_string()),
                ("total-equality-deletes".to_string(), "0".to_string()),
            ]),
        };
        let builder = match previous.take() {
            None => TableMetadataBuilder::new(
                schema.as_ref().clone(),
                unbound_spec.clone(),
                SortOrder::unsorted_order(),
                location_str.clone(),
                FormatVersion::V2,
                properties.clone(),
            )?,
            Some((metadata, location)) => TableMetadataBuilder::new_from_metadata(metadata, Some(location)),
        };
        let metadata = add_to_main(
            builder,
            NewSnapshot {
                snapshot_id,
                parent,
                sequence_number,
                timestamp_ms,
                manifest_list: manifest_list_path,
                summary,
                schema_id: schema.schema_id(),
                row_range: None,
            },
        )?;
        let version = snapshot_index + 1;
        let metadata_location = format!("{}/v{version}.metadata.json", metadata_dir.display());
        let json = serde_json::to_vec_pretty(&metadata)
            .map_err(|e| Error::new(ErrorKind::CorruptMetadata, format!("cannot serialize metadata: {e}")))?;
        replace_file(Path::new(&metadata_location), &json)?;
        std::fs::write(metadata_dir.join("version-hint.text"), version.to_string())?;
        previous = Some((metadata, metadata_location));
        parent = Some(snapshot_id);
    }

    let (_, metadata_location) = previous.expect("at least two snapshots");
    Ok(DemoReport {
        table_location: location_str,
        metadata_location,
        partitions: SHAPES.len() as u64,
        data_files,
        snapshots: u64::from(options.snapshots),
        total_bytes,
        record_count,
        small_file_threshold_mb: 64.0 * options.scale,
    })
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
