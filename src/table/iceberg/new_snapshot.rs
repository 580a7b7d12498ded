//! The pieces a new Iceberg snapshot is written with: its id, manifest writers (a manifest
//! rewritten without some entries among them), the manifest list, and the metadata that makes it
//! the `main` branch's head. Committers assemble their snapshot through
//! [`super::snapshot_builder::SnapshotBuilder`]; the demo table, which writes a history from
//! nothing, uses these directly. Committing that metadata is [`super::commit`]'s.

use iceberg::io::FileIO;
use iceberg::spec::{FormatVersion, ManifestFile, TableMetadata};

use super::{IcebergTable, LoadedManifest, manifest};
use crate::error::{Error, ErrorKind, Result};

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
pub(super) async fn rewrite_manifest_dropping(
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
pub(super) async fn write_manifest_list(
    table: &IcebergTable,
    snapshot_id: i64,
    manifests: impl IntoIterator<Item = ManifestFile>,
    scratch: &mut Vec<String>,
) -> Result<ListWritten> {
    let metadata = &table.metadata;
    let (parent, sequence_number) = (metadata.current_snapshot_id(), metadata.next_sequence_number());
    let path = list_path(&table.metadata_dir(), snapshot_id);
    scratch.push(path.clone());
    let first_row_id = metadata.next_row_id();
    let at = ListAt { version: metadata.format_version(), snapshot_id, parent, sequence_number, first_row_id };
    let row_range = write_list(&table.file_io, &path, at, manifests).await?;
    Ok(ListWritten { path, row_range })
}

/// A new path for snapshot `snapshot_id`'s manifest list in `metadata_dir`, named as Java names
/// it.
pub fn list_path(metadata_dir: &str, snapshot_id: i64) -> String {
    format!("{metadata_dir}/snap-{snapshot_id}-1-{}.avro", uuid::Uuid::new_v4())
}

/// Where in a table's history a manifest list is written ([`write_list`]).
pub struct ListAt {
    /// The table's format version.
    pub version: FormatVersion,
    /// The snapshot whose list it is.
    pub snapshot_id: i64,
    /// The snapshot it follows.
    pub parent: Option<i64>,
    /// Its sequence number (v2 and later).
    pub sequence_number: i64,
    /// Format v3: the table's `next-row-id`, the first id the list assigns.
    pub first_row_id: u64,
}

/// Writes a manifest list naming `manifests` at `path` in the format of `at.version`; format v3:
/// returns the row ids it assigned (first, count) to data manifests that had none.
pub async fn write_list(
    file_io: &FileIO,
    path: &str,
    at: ListAt,
    manifests: impl IntoIterator<Item = ManifestFile>,
) -> Result<Option<(u64, u64)>> {
    let ListAt { version, snapshot_id, parent, sequence_number, first_row_id } = at;
    let output = file_io.new_output(path)?.writer().await?;
    let mut list = match version {
        FormatVersion::V1 => iceberg::spec::ManifestListWriter::v1(output, snapshot_id, parent),
        FormatVersion::V2 => iceberg::spec::ManifestListWriter::v2(output, snapshot_id, parent, sequence_number),
        FormatVersion::V3 => {
            iceberg::spec::ManifestListWriter::v3(output, snapshot_id, parent, sequence_number, Some(first_row_id))
        }
    };
    list.add_manifests(manifests.into_iter())?;
    let row_range = list.next_row_id().map(|next| (first_row_id, next - first_row_id));
    list.close().await?;
    Ok(row_range)
}

/// `table`'s metadata with a new snapshot on `main` after the current one: the next sequence
/// number, the current schema, taken now ([`add_to_main`]).
pub(super) fn with_main_snapshot(
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
