//! Reading a Delta deletion vector (PROTOCOL.md, "Deletion Vectors") into the set of physical
//! row indexes it deletes, checked before anything is rewritten from it.
//!
//! - Inline (`storageType` `i`): the descriptor's `pathOrInlineDv` is the Z85 text of the
//!   bitmap's bytes (`sizeInBytes` of them: a little-endian magic, then the bitmap).
//! - Stored (`u`: a file beside the table named by a UUID, with an optional directory prefix;
//!   `p`: an absolute path): the file starts with a version byte (1); at `offset` (absent: 1)
//!   is a big-endian u32 size (= `sizeInBytes`), that many bytes (magic, then the bitmap), and
//!   a big-endian CRC-32 of them.
//!
//! The bitmap is the 64-bit portable RoaringBitmap ([`crate::table::deleted_rows`], the layout
//! Iceberg's deletion vectors share). Every check a reader could skip is made: version, size,
//! magic, CRC, and the descriptor's `cardinality` against the bits set; a caller that knows the
//! file's row count also checks that no index lies beyond it ([`DeletedRows::check_within`]).

use std::path::Path;

use deltalake_core::kernel::{DeletionVectorDescriptor, StorageType};

use crate::error::{Error, ErrorKind, Result};
pub use crate::table::deleted_rows::DeletedRows;
use crate::table::deleted_rows::corrupt;

/// Reads and checks the deletion vector `dv` of a file of the table at `root`.
pub fn read(root: &Path, dv: &DeletionVectorDescriptor) -> Result<DeletedRows> {
    let what = describe(root, dv);
    let deleted = match dv.storage_type {
        StorageType::Inline => DeletedRows::from_data(&inline_data(dv)?, &what)?,
        StorageType::UuidRelativePath | StorageType::AbsolutePath => stored(root, dv)?,
    };
    deleted.check_cardinality(dv.cardinality.max(0) as u64, &what)?;
    Ok(deleted)
}

/// `sizeInBytes` of the Z85-decoded inline text.
fn inline_data(dv: &DeletionVectorDescriptor) -> Result<Vec<u8>> {
    let what = "an inline deletion vector";
    let mut bytes = z85::decode(dv.path_or_inline_dv.as_bytes())
        .map_err(|e| corrupt(what, format!("its text is not Z85 ({e:?})")))?;
    let size = usize::try_from(dv.size_in_bytes).map_err(|_| corrupt(what, "a negative sizeInBytes"))?;
    if bytes.len() < size {
        return Err(corrupt(what, format!("{} bytes decoded, sizeInBytes {size}", bytes.len())));
    }
    bytes.truncate(size);
    Ok(bytes)
}

/// A vector stored in a file, checked.
fn stored(root: &Path, dv: &DeletionVectorDescriptor) -> Result<DeletedRows> {
    let location = super::deletion_vector_file(root, dv)
        .ok_or_else(|| corrupt(&describe(root, dv), "its path cannot be resolved"))?
        .to_string_lossy()
        .into_owned();
    let what = describe(root, dv);
    // An absolute path (`p`) is the log writer's to choose: read it only on the table's store, as
    // a data file would be (`TableRoot::check_read`), never from another store or a URL.
    crate::store::TableRoot::of_directory(&root.to_string_lossy())?
        .check_read(&location)
        .map_err(|e| corrupt(&what, e.message().to_string()))?;
    let size = u64::try_from(dv.size_in_bytes).map_err(|_| corrupt(&what, "a negative sizeInBytes"))?;
    let start = u64::try_from(dv.offset.unwrap_or(1)).map_err(|_| corrupt(&what, "a negative offset"))?;
    if start == 0 {
        return Err(corrupt(&what, "offset 0 is the file's version byte"));
    }
    let (version, block) = read_ranges(&location, start, 4 + size + 4)?;
    if version != 1 {
        return Err(corrupt(&what, format!("its file has format version {version}, not 1")));
    }
    if block.len() as u64 != 4 + size + 4 {
        return Err(corrupt(&what, format!("its file ends {} bytes into the vector", block.len())));
    }
    DeletedRows::from_framed(&block, Some(size), &what)
}

/// The version byte of the file at `location` and its `len` bytes from `start` (fewer when the
/// file ends first).
fn read_ranges(location: &str, start: u64, len: u64) -> Result<(u8, Vec<u8>)> {
    if crate::store::local_path(location).is_none() {
        let (version, block) = crate::runtime::block_on(async {
            let head = crate::store::read_range(location, 0..1).await?;
            let block = crate::store::read_range(location, start..start + len).await?;
            Ok::<_, Error>((head, block))
        })??;
        let version = *version.first().ok_or_else(|| corrupt(location, "the file is empty"))?;
        return Ok((version, block.to_vec()));
    }
    use std::io::{Read, Seek, SeekFrom};
    let mut file = std::fs::File::open(location)
        .map_err(|e| Error::new(ErrorKind::Io, format!("cannot open deletion vector file '{location}': {e}")))?;
    let mut version = [0u8; 1];
    file.read_exact(&mut version).map_err(|_| corrupt(location, "the file is empty"))?;
    file.seek(SeekFrom::Start(start))?;
    let mut block = Vec::with_capacity(len as usize);
    file.take(len).read_to_end(&mut block)?;
    Ok((version[0], block))
}

/// How an error names the vector: its file, or `an inline deletion vector`.
fn describe(root: &Path, dv: &DeletionVectorDescriptor) -> String {
    match super::deletion_vector_file(root, dv) {
        Some(file) => format!("deletion vector '{}'", file.display()),
        None => "an inline deletion vector".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::deleted_rows::PORTABLE_MAGIC;
    use roaring::RoaringTreemap;

    /// A deletion vector's data (magic + bitmap) of `rows`, as Delta writes it.
    fn data(rows: &[u64]) -> Vec<u8> {
        let bitmap: RoaringTreemap = rows.iter().copied().collect();
        let mut out = PORTABLE_MAGIC.to_le_bytes().to_vec();
        bitmap.serialize_into(&mut out).unwrap();
        out
    }

    fn descriptor(
        storage: StorageType,
        path: String,
        offset: Option<i32>,
        size: usize,
        cardinality: i64,
    ) -> DeletionVectorDescriptor {
        DeletionVectorDescriptor {
            storage_type: storage,
            path_or_inline_dv: path,
            offset,
            size_in_bytes: size as i32,
            cardinality,
        }
    }

    /// A vector file holding `vectors` one after the other; their offsets.
    fn write_file(path: &Path, vectors: &[Vec<u8>]) -> Vec<i32> {
        let mut bytes = vec![1u8];
        let mut offsets = Vec::new();
        for v in vectors {
            offsets.push(bytes.len() as i32);
            bytes.extend((v.len() as u32).to_be_bytes());
            bytes.extend(v);
            bytes.extend(crc32fast::hash(v).to_be_bytes());
        }
        std::fs::write(path, bytes).unwrap();
        offsets
    }

    #[test]
    fn stored_vectors_are_read_at_their_offsets_and_checked() {
        let dir = std::env::temp_dir().join(format!("lakehouse-dv-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("vectors.bin");
        let (a, b) = (data(&[0, 3, 5]), data(&[1, 1 << 33]));
        let offsets = write_file(&file, &[a.clone(), b.clone()]);
        let path = url::Url::from_file_path(&file).unwrap().to_string();
        let dv = descriptor(StorageType::AbsolutePath, path.clone(), Some(offsets[1]), b.len(), 2);
        let got = read(&dir, &dv).unwrap();
        assert_eq!(got.rows.iter().collect::<Vec<_>>(), vec![1, 1 << 33]);
        assert!(got.check_within(1 << 34, "f").is_ok());
        assert!(got.check_within(1 << 33, "f").unwrap_err().message().contains("deletes row 8589934592"));
        // No offset: the first vector, right after the version byte.
        let first = read(&dir, &descriptor(StorageType::AbsolutePath, path.clone(), None, a.len(), 3)).unwrap();
        assert_eq!(first.rows.iter().collect::<Vec<_>>(), vec![0, 3, 5]);
        // Wrong cardinality, wrong size, flipped byte, wrong version: each refused, naming why.
        let refusals = [
            (descriptor(StorageType::AbsolutePath, path.clone(), None, a.len(), 4), "metadata says 4"),
            (descriptor(StorageType::AbsolutePath, path.clone(), None, a.len() + 1, 3), "the file says"),
            (descriptor(StorageType::AbsolutePath, path.clone(), Some(0), a.len(), 3), "offset 0"),
        ];
        for (dv, want) in refusals {
            let message = read(&dir, &dv).unwrap_err().message().to_string();
            assert!(message.contains(want) && message.contains("vectors.bin"), "{message}");
        }
        let mut bytes = std::fs::read(&file).unwrap();
        bytes[offsets[0] as usize + 6] ^= 0x40;
        std::fs::write(&file, &bytes).unwrap();
        let dv = descriptor(StorageType::AbsolutePath, path.clone(), None, a.len(), 3);
        assert!(read(&dir, &dv).unwrap_err().message().contains("CRC-32"));
        bytes[0] = 2;
        std::fs::write(&file, &bytes).unwrap();
        assert!(read(&dir, &dv).unwrap_err().message().contains("version 2"));
        // `u`: a random prefix (a directory) and the Z85 of the file's UUID.
        let id = uuid::Uuid::new_v4();
        std::fs::create_dir_all(dir.join("ab")).unwrap();
        let named = dir.join("ab").join(format!("deletion_vector_{id}.bin"));
        let offsets = write_file(&named, &[b.clone(), a.clone()]);
        let relative = format!("ab{}", z85::encode(id.as_bytes()));
        let dv = descriptor(StorageType::UuidRelativePath, relative, Some(offsets[1]), a.len(), 3);
        assert_eq!(read(&dir, &dv).unwrap().rows.iter().collect::<Vec<_>>(), vec![0, 3, 5]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_absolute_path_off_the_tables_store_is_not_read() {
        let dir = std::env::temp_dir().join(format!("lakehouse-dv-{}", uuid::Uuid::new_v4()));
        for path in ["http://127.0.0.1:9/vectors.bin", "s3://elsewhere/vectors.bin"] {
            let dv = descriptor(StorageType::AbsolutePath, path.into(), Some(1), 8, 1);
            let err = read(&dir, &dv).unwrap_err().message().to_string();
            assert!(err.contains("is not a file of the table's store"), "{path}: {err}");
        }
    }

    #[test]
    fn inline_vectors_are_z85_of_their_data() {
        let raw = data(&[2, 7, 9]);
        let mut padded = raw.clone();
        padded.resize(raw.len().div_ceil(4) * 4, 0);
        let text = z85::encode(&padded);
        let dv = descriptor(StorageType::Inline, text.clone(), None, raw.len(), 3);
        let got = read(Path::new("/nowhere"), &dv).unwrap();
        assert_eq!(got.rows.iter().collect::<Vec<_>>(), vec![2, 7, 9]);
        let bad_magic = z85::encode([0u8; 8]);
        let dv = descriptor(StorageType::Inline, bad_magic, None, 8, 0);
        assert!(read(Path::new("/nowhere"), &dv).unwrap_err().message().contains("magic"));
        let dv = descriptor(StorageType::Inline, "not z85 ~".into(), None, 8, 0);
        assert!(read(Path::new("/nowhere"), &dv).unwrap_err().message().contains("Z85"));
    }
}
