//! The deleted rows of one data file as both formats store them: a 64-bit portable
//! RoaringBitmap of physical row positions behind a little-endian magic, framed by a big-endian
//! length and a big-endian CRC-32. Delta's deletion vectors ([`crate::table::delta::deletion_vector`])
//! and Iceberg's `deletion-vector-v1` Puffin blobs ([`crate::table::iceberg::deletion_vector`])
//! share the layout (Iceberg adopted Delta's), so the checks are made here once.

use roaring::RoaringTreemap;

use crate::error::{Error, ErrorKind, Result};

/// The magic of a portable 64-bit RoaringBitmap in a deletion vector (bytes `D1 D3 39 64`,
/// little-endian).
pub const PORTABLE_MAGIC: u32 = 1_681_511_377;

/// The rows a deletion vector deletes: physical row indexes of its data file.
#[derive(Debug, Clone, PartialEq)]
pub struct DeletedRows {
    /// The indexes, as the vector stores them.
    pub rows: RoaringTreemap,
}

impl DeletedRows {
    /// The bitmap of a vector's data (`data`: the magic, then the bitmap); `what` names the
    /// vector in errors.
    pub fn from_data(data: &[u8], what: &str) -> Result<Self> {
        let magic = data.get(0..4).map(|m| u32::from_le_bytes(m.try_into().expect("4 bytes")));
        if magic != Some(PORTABLE_MAGIC) {
            return Err(corrupt(what, format!("magic {magic:?}, not the portable RoaringBitmap's {PORTABLE_MAGIC}")));
        }
        let rows = RoaringTreemap::deserialize_from(&data[4..])
            .map_err(|e| corrupt(what, format!("its bitmap does not parse ({e})")))?;
        Ok(Self { rows })
    }

    /// A framed vector (`block`: big-endian length, magic and bitmap of that length, big-endian
    /// CRC-32 of them), every field checked; `size` is the length the metadata gives, if any.
    pub fn from_framed(block: &[u8], size: Option<u64>, what: &str) -> Result<Self> {
        if block.len() < 12 {
            return Err(corrupt(what, format!("it is {} bytes, too short for a framed vector", block.len())));
        }
        let stored = u64::from(u32::from_be_bytes(block[0..4].try_into().expect("4 bytes")));
        if let Some(size) = size
            && stored != size
        {
            return Err(corrupt(what, format!("the file says {stored} bytes, the descriptor {size}")));
        }
        if stored + 8 != block.len() as u64 {
            return Err(corrupt(
                what,
                format!("its length field says {stored} bytes, the blob holds {}", block.len() - 8),
            ));
        }
        let data = &block[4..block.len() - 4];
        let crc = u32::from_be_bytes(block[block.len() - 4..].try_into().expect("4 bytes"));
        let actual = crc32fast::hash(data);
        if crc != actual {
            return Err(corrupt(what, format!("CRC-32 {actual:#010x} does not match the stored {crc:#010x}")));
        }
        Self::from_data(data, what)
    }

    /// The framed vector ([`DeletedRows::from_framed`] reads it back): big-endian length, magic
    /// and bitmap, big-endian CRC-32 of them.
    pub fn to_framed(&self) -> Vec<u8> {
        let mut data = PORTABLE_MAGIC.to_le_bytes().to_vec();
        self.rows.serialize_into(&mut data).expect("writing to a Vec cannot fail");
        let mut out = Vec::with_capacity(data.len() + 8);
        out.extend((data.len() as u32).to_be_bytes());
        out.extend(&data);
        out.extend(crc32fast::hash(&data).to_be_bytes());
        out
    }

    /// Refuses a vector whose bit count is not `cardinality` (what the metadata says it deletes).
    pub fn check_cardinality(&self, cardinality: u64, what: &str) -> Result<()> {
        if self.rows.len() != cardinality {
            return Err(corrupt(what, format!("it sets {} rows, its metadata says {cardinality}", self.rows.len())));
        }
        Ok(())
    }

    /// Refuses a vector that deletes a row index at or past `num_records` (the file's rows):
    /// it does not belong to this file, and applying it would remove the wrong rows.
    pub fn check_within(&self, num_records: u64, file: &str) -> Result<()> {
        match self.rows.max() {
            Some(last) if last >= num_records => Err(Error::new(
                ErrorKind::CorruptMetadata,
                format!("the deletion vector of '{file}' deletes row {last}, but the file has {num_records} rows"),
            )),
            _ => Ok(()),
        }
    }
}

/// An unreadable vector, named by `what`.
pub fn corrupt(what: &str, why: impl std::fmt::Display) -> Error {
    Error::new(ErrorKind::CorruptMetadata, format!("{what} is unreadable: {why}; nothing was rewritten"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A framed vector of `rows`, as both formats write it.
    pub(crate) fn framed(rows: &[u64]) -> Vec<u8> {
        let bitmap: RoaringTreemap = rows.iter().copied().collect();
        let mut data = PORTABLE_MAGIC.to_le_bytes().to_vec();
        bitmap.serialize_into(&mut data).unwrap();
        let mut out = (data.len() as u32).to_be_bytes().to_vec();
        out.extend(&data);
        out.extend(crc32fast::hash(&data).to_be_bytes());
        out
    }

    #[test]
    fn framed_vectors_are_checked_field_by_field() {
        let block = framed(&[0, 4, 1 << 32]);
        let rows: RoaringTreemap = [0, 4, 1 << 32].into_iter().collect();
        assert_eq!(DeletedRows { rows }.to_framed(), block, "what we write is what the formats write");
        let got = DeletedRows::from_framed(&block, None, "v").unwrap();
        assert_eq!(got.rows.iter().collect::<Vec<_>>(), vec![0, 4, 1 << 32]);
        assert!(got.check_cardinality(3, "v").is_ok());
        assert!(got.check_cardinality(2, "v").unwrap_err().message().contains("sets 3 rows"));
        let size = block.len() as u64 - 8;
        assert!(DeletedRows::from_framed(&block, Some(size), "v").is_ok());
        let wrong_size = DeletedRows::from_framed(&block, Some(size + 1), "v").unwrap_err();
        assert!(wrong_size.message().contains("the file says"), "{}", wrong_size.message());
        let truncated = DeletedRows::from_framed(&block[..block.len() - 1], None, "v").unwrap_err();
        assert!(truncated.message().contains("length field"), "{}", truncated.message());
        let mut flipped = block.clone();
        flipped[9] ^= 1;
        assert!(DeletedRows::from_framed(&flipped, None, "v").unwrap_err().message().contains("CRC-32"));
        let mut bad_magic = block;
        bad_magic[4] = 0;
        let n = bad_magic.len();
        let crc = crc32fast::hash(&bad_magic[4..n - 4]).to_be_bytes();
        bad_magic[n - 4..].copy_from_slice(&crc);
        assert!(DeletedRows::from_framed(&bad_magic, None, "v").unwrap_err().message().contains("magic"));
        assert!(DeletedRows::from_framed(&[0; 5], None, "v").unwrap_err().message().contains("too short"));
    }
}
