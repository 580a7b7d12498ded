//! Reading an Iceberg deletion vector (format v3): a `deletion-vector-v1` blob of a Puffin file,
//! which the delete manifest entry locates (`content_offset`, `content_size_in_bytes`) and ties
//! to one data file (`referenced_data_file`). The blob is the framed portable RoaringBitmap
//! Delta uses ([`crate::table::deleted_rows`]); its length, magic, CRC and bit count (the entry's
//! `record_count`) are checked before a row is dropped by it.

use iceberg::io::FileIO;
use iceberg::spec::{DataContentType, DataFile, DataFileFormat};

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
