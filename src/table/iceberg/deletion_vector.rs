//! Reading an Iceberg deletion vector (format v3): a `deletion-vector-v1` blob of a Puffin file,
//! which the delete manifest entry locates (`content_offset`, `content_size_in_bytes`) and ties
//! to one data file (`referenced_data_file`). The blob is the framed portable RoaringBitmap
//! Delta uses ([`crate::table::deleted_rows`]); its length, magic, CRC and bit count (the entry's
//! `record_count`) are checked before a row is dropped by it. `write` (below) writes vectors as Java's
//! `BaseDVFileWriter` does.

use std::collections::HashMap;

use iceberg::io::FileIO;
use iceberg::puffin::{Blob, CompressionCodec, DELETION_VECTOR_V1, PuffinWriter};
use iceberg::spec::{DataContentType, DataFile, DataFileBuilder, DataFileFormat, Struct};

use crate::error::{Error, ErrorKind, Result};
use crate::table::deleted_rows::{DeletedRows, corrupt};

/// Whether `file` is a deletion vector (a position delete stored as a Puffin blob).
pub fn is_deletion_vector(file: &DataFile) -> bool {
    file.content_type() == DataContentType::PositionDeletes && file.file_format() == DataFileFormat::Puffin
}

/// Reads and checks the deletion vector `file` (a delete manifest entry's file).
pub async fn read(file_io: &FileIO, file: &DataFile) -> Result<DeletedRows> {
    let what = describe(file);
    let (Some(offset), Some(size)) = (file.content_offset(), file.content_size_in_bytes()) else {
        return Err(corrupt(&what, "its entry has no content_offset or content_size_in_bytes"));
    };
    if file.referenced_data_file().is_none() {
        return Err(corrupt(&what, "its entry names no referenced_data_file"));
    }
    let (offset, size) = match (u64::try_from(offset), u64::try_from(size)) {
        (Ok(o), Ok(s)) if s >= 12 => (o, s),
        _ => return Err(corrupt(&what, format!("offset {offset} and size {size} do not locate a blob"))),
    };
    let block = async {
        let reader = file_io.new_input(file.file_path())?.reader().await?;
        reader.read(offset..offset + size).await
    }
    .await
    .map_err(|e| {
        Error::new(ErrorKind::Io, format!("cannot read {what}: {}", crate::error::Error::from(e).message()))
    })?;
    if block.len() as u64 != size {
        return Err(corrupt(&what, format!("the file ends {} bytes into the blob", block.len())));
    }
    let deleted = DeletedRows::from_framed(&block, Some(size - 8), &what)?;
    deleted.check_cardinality(file.record_count(), &what)?;
    Ok(deleted)
}

/// How an error names a deletion vector: its Puffin file and offset.
fn describe(file: &DataFile) -> String {
    format!("the deletion vector at offset {} of '{}'", file.content_offset().unwrap_or(-1), file.file_path())
}

/// The field id of the row position (`_pos`) a vector's blob names, as Java writes it.
const ROW_POSITION_FIELD_ID: i32 = 2_147_483_545;

/// A deletion vector to write: the data file it deletes rows of (its path as the manifest names
/// it, partition and spec) and the rows.
pub struct NewVector {
    /// The data file's path.
    pub data_file: String,
    /// Its partition tuple.
    pub partition: Struct,
    /// Its partition spec.
    pub spec_id: i32,
    /// The rows deleted (positions in the data file).
    pub deleted: DeletedRows,
}

/// Writes `vectors` as the blobs of one Puffin file at `path` (uncompressed, as the spec requires
/// of `deletion-vector-v1`; snapshot id and sequence number left to inheritance, -1); returns
/// the delete manifest entries' files, one per vector, in order.
pub async fn write(file_io: &FileIO, path: &str, vectors: &[NewVector]) -> Result<Vec<DataFile>> {
    let output = file_io.new_output(path)?;
    let properties = HashMap::from([("created-by".to_string(), "lakehouse".to_string())]);
    let mut writer = PuffinWriter::new(&output, properties, false).await?;
    // The Puffin header is its 4-byte magic; blobs follow one another uncompressed.
    let mut offset = 4u64;
    let mut placed = Vec::with_capacity(vectors.len());
    for v in vectors {
        let data = v.deleted.to_framed();
        let length = data.len() as u64;
        let blob = Blob::builder()
            .r#type(DELETION_VECTOR_V1.to_string())
            .fields(vec![ROW_POSITION_FIELD_ID])
            .snapshot_id(-1)
            .sequence_number(-1)
            .data(data)
            .properties(HashMap::from([
                ("referenced-data-file".to_string(), v.data_file.clone()),
                ("cardinality".to_string(), v.deleted.rows.len().to_string()),
            ]))
            .build();
        writer.add(blob, CompressionCodec::None).await?;
        placed.push((offset, length));
        offset += length;
    }
    writer.close().await?;
    let size = file_io.new_input(path)?.metadata().await?.size;
    vectors
        .iter()
        .zip(placed)
        .map(|(v, (offset, length))| {
            DataFileBuilder::default()
                .content(DataContentType::PositionDeletes)
                .file_path(path.to_string())
                .file_format(DataFileFormat::Puffin)
                .partition(v.partition.clone())
                .partition_spec_id(v.spec_id)
                .record_count(v.deleted.rows.len())
                .file_size_in_bytes(size)
                .referenced_data_file(Some(v.data_file.clone()))
                .content_offset(Some(offset as i64))
                .content_size_in_bytes(Some(length as i64))
                .build()
                .map_err(|e| Error::new(ErrorKind::CorruptMetadata, format!("deletion vector entry: {e}")))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_vectors_read_back_through_their_entries_and_the_puffin_footer() {
        let dir = std::env::temp_dir().join(format!("lakehouse-puffin-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("dv.puffin").to_string_lossy().into_owned();
        let file_io = crate::store::file_io_for(&path);
        let vector = |file: &str, rows: &[u64]| NewVector {
            data_file: file.to_string(),
            partition: Struct::empty(),
            spec_id: 0,
            deleted: DeletedRows { rows: rows.iter().copied().collect() },
        };
        let vectors = [vector("/t/a.parquet", &[0, 7, 9]), vector("/t/b.parquet", &[3, 1 << 33])];
        let entries = crate::runtime::block_on(write(&file_io, &path, &vectors)).unwrap().unwrap();
        assert_eq!(entries.len(), 2);
        for (entry, v) in entries.iter().zip(&vectors) {
            assert!(is_deletion_vector(entry));
            assert_eq!(entry.referenced_data_file().as_deref(), Some(v.data_file.as_str()));
            let read = crate::runtime::block_on(read(&file_io, entry)).unwrap().unwrap();
            assert_eq!(read, v.deleted);
        }
        // iceberg-rust's own Puffin reader finds the blobs where the entries say.
        let footer = crate::runtime::block_on(async {
            let reader = iceberg::puffin::PuffinReader::new(file_io.new_input(&path).unwrap());
            reader.file_metadata().await.cloned()
        })
        .unwrap()
        .unwrap();
        let placed: Vec<(i64, i64)> = footer.blobs().iter().map(|b| (b.offset() as i64, b.length() as i64)).collect();
        let want: Vec<(i64, i64)> =
            entries.iter().map(|e| (e.content_offset().unwrap(), e.content_size_in_bytes().unwrap())).collect();
        assert_eq!(placed, want);
        assert!(footer.blobs().iter().all(|b| b.blob_type() == DELETION_VECTOR_V1));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
