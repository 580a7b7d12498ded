//! Bounded decompression of the metadata files other programs wrote: the Avro blocks of manifests
//! and manifest lists, gzip-compressed metadata.json. Whoever writes a table controls these bytes,
//! and a file of a few hundred KiB can inflate to many GiB (a zstd block of run-length blocks
//! inflates 32,768 times): an allocation that fails aborts the process, and the user's DuckDB
//! session with it, which no error handling catches. So every inflate stops at
//! [`limit_bytes`] of its file: [`INFLATE_RATIO`] times the compressed size, or
//! [`INFLATE_FLOOR_BYTES`] when that is more (real metadata inflates a few times: the manifests
//! of the fuzzer's corpus 1.1 times, `avro.rs`'s test); a file beyond the limit is refused as a
//! decompression bomb, with an error naming it, before more than the limit is allocated.

use std::io::Read;

/// How many times its compressed size a file's content may inflate to.
pub const INFLATE_RATIO: usize = 100;
/// What any file may inflate to, whatever its compressed size.
pub const INFLATE_FLOOR_BYTES: usize = 64 << 20;

/// The most a file of `compressed_bytes` may inflate to (all its blocks together).
pub fn limit_bytes(compressed_bytes: usize) -> usize {
    compressed_bytes.saturating_mul(INFLATE_RATIO).max(INFLATE_FLOOR_BYTES)
}

/// Why an inflate stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stopped {
    /// The content inflates beyond the limit it was given.
    TooLarge,
    /// The compressed stream is malformed (the decoder's words).
    Corrupt(String),
}

/// What the refusal of a file of `compressed_bytes` as a bomb says (after the file's name).
pub fn bomb_message(compressed_bytes: usize) -> String {
    format!(
        "inflates to more than {} bytes ({INFLATE_RATIO} times its {compressed_bytes} compressed bytes, at least \
         {INFLATE_FLOOR_BYTES}): refused as a decompression bomb",
        limit_bytes(compressed_bytes)
    )
}

/// Appends all of `reader` to `out`, at most `limit` bytes: [`Stopped::TooLarge`] beyond (`out`
/// as it was; no more than the limit was allocated), [`Stopped::Corrupt`] when the reader fails.
pub fn read_capped(mut reader: impl Read, out: &mut Vec<u8>, limit: usize) -> Result<(), Stopped> {
    let start = out.len();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let n = match reader.read(&mut chunk) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Stopped::Corrupt(e.to_string())),
        };
        let so_far = out.len() - start;
        if so_far + n > limit {
            out.truncate(start);
            return Err(Stopped::TooLarge);
        }
        if out.capacity() - out.len() < n {
            // Doubling, but never past the limit.
            out.reserve_exact(so_far.max(n).min(limit - so_far));
        }
        out.extend_from_slice(&chunk[..n]);
    }
}

/// Inflates the raw deflate stream `block` (Avro's `deflate`) into `out` (emptied first) with
/// `inflater` (reset first), at most `limit` bytes. One inflater serves every block of a file:
/// setting one up (its zeroed window) per block cost more than the inflating.
pub fn inflate_raw(
    inflater: &mut flate2::Decompress,
    block: &[u8],
    out: &mut Vec<u8>,
    limit: usize,
) -> Result<(), Stopped> {
    use flate2::{FlushDecompress, Status};
    let truncated = || Stopped::Corrupt("the deflate stream ends early".into());
    inflater.reset(false);
    out.clear();
    // Room for one byte beyond the limit: filling it means the content is larger.
    let room = limit.saturating_add(1);
    out.reserve_exact(block.len().saturating_mul(4).min(room));
    loop {
        let read = usize::try_from(inflater.total_in()).map_err(|_| truncated())?;
        let written = out.len();
        let status = inflater
            .decompress_vec(block.get(read..).ok_or_else(truncated)?, out, FlushDecompress::Finish)
            .map_err(|e| Stopped::Corrupt(e.to_string()))?;
        if out.len() > limit {
            return Err(Stopped::TooLarge);
        }
        match status {
            Status::StreamEnd => return Ok(()),
            // Out of room: grow (never past the limit and one) and go on; no progress with room
            // to spare: a truncated stream.
            _ if out.len() == out.capacity() => out.reserve_exact(out.capacity().max(4096).min(room - out.len())),
            _ if out.len() == written && usize::try_from(inflater.total_in()).ok() == Some(read) => {
                return Err(truncated());
            }
            _ => {}
        }
    }
}

/// Decompresses an Avro block of `codec` (`snappy`, `zstandard`) into a new buffer, at most
/// `limit` bytes; `None` for another codec.
pub fn avro_block(codec: &str, block: &[u8], limit: usize) -> Option<Result<Vec<u8>, Stopped>> {
    Some(match codec {
        "snappy" => snappy(block, limit),
        "zstandard" => {
            let mut out = Vec::new();
            zstd::stream::read::Decoder::with_buffer(block)
                .map_err(|e| Stopped::Corrupt(e.to_string()))
                .and_then(|decoder| read_capped(decoder, &mut out, limit))
                .map(|()| out)
        }
        _ => return None,
    })
}

/// A snappy block: the raw stream, then the CRC32 of the uncompressed data (big-endian). Its
/// declared length is checked against `limit` before anything is allocated.
fn snappy(block: &[u8], limit: usize) -> Result<Vec<u8>, Stopped> {
    let corrupt = |what: &str| Stopped::Corrupt(what.to_string());
    let (data, crc) = block.split_at(block.len().checked_sub(4).ok_or_else(|| corrupt("a snappy block is empty"))?);
    let declared = snap::raw::decompress_len(data).map_err(|e| Stopped::Corrupt(e.to_string()))?;
    if declared > limit {
        return Err(Stopped::TooLarge);
    }
    let out = snap::raw::Decoder::new().decompress_vec(data).map_err(|e| Stopped::Corrupt(e.to_string()))?;
    if crc32fast::hash(&out).to_be_bytes() != crc {
        return Err(corrupt("a snappy block's checksum does not match"));
    }
    Ok(out)
}

/// A zstd frame of `blocks` run-length blocks of 128 KiB each (4 bytes apiece): what a
/// decompression bomb looks like. Test builds only (unit tests and the fuzzer's seeds).
#[cfg(test)]
pub fn zstd_bomb(blocks: usize) -> Vec<u8> {
    let mut out = vec![0x28, 0xb5, 0x2f, 0xfd];
    // Frame header: no content size, no checksum, a window descriptor of 128 KiB (2^(10+7)).
    out.extend_from_slice(&[0x00, 7 << 3]);
    for i in 0..blocks {
        let last = u32::from(i + 1 == blocks);
        let header = last | (1 << 1) | ((128 * 1024) << 3);
        out.extend_from_slice(&header.to_le_bytes()[..3]);
        out.push(b'x');
    }
    out
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn deflated(data: &[u8]) -> Vec<u8> {
        let mut encoder = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
        encoder.write_all(data).unwrap();
        encoder.finish().unwrap()
    }

    /// One inflater serves block after block (reset between them), whatever their sizes; a
    /// truncated block is refused, and the inflater still serves the next one.
    #[test]
    fn one_inflater_inflates_every_block_and_refuses_a_truncated_one() {
        let blocks: Vec<Vec<u8>> =
            vec![b"manifest entries ".repeat(2000), Vec::new(), (0..=255u8).cycle().take(70_000).collect()];
        let mut inflater = flate2::Decompress::new(false);
        let mut out = Vec::new();
        for block in &blocks {
            inflate_raw(&mut inflater, &deflated(block), &mut out, usize::MAX).unwrap();
            assert_eq!(&out, block);
        }
        let whole = deflated(&blocks[2]);
        assert!(matches!(
            inflate_raw(&mut inflater, &whole[..whole.len() / 2], &mut out, 1 << 20),
            Err(Stopped::Corrupt(_))
        ));
        inflate_raw(&mut inflater, &deflated(&blocks[0]), &mut out, 1 << 20).unwrap();
        assert_eq!(out, blocks[0]);
    }

    /// Every codec inflates exactly up to its limit and refuses one byte more, allocating no
    /// more than the limit and one.
    #[test]
    fn every_codec_stops_at_its_limit() {
        let data = b"abc".repeat(10_000);
        let mut inflater = flate2::Decompress::new(false);
        let mut out = Vec::new();
        inflate_raw(&mut inflater, &deflated(&data), &mut out, data.len()).unwrap();
        assert_eq!(out, data);
        let mut fresh = Vec::new();
        assert_eq!(inflate_raw(&mut inflater, &deflated(&data), &mut fresh, data.len() - 1), Err(Stopped::TooLarge));
        assert!(fresh.capacity() <= data.len(), "{}", fresh.capacity());

        let zstd = zstd::bulk::compress(&data, 3).unwrap();
        assert_eq!(avro_block("zstandard", &zstd, data.len()).unwrap().unwrap(), data);
        assert_eq!(avro_block("zstandard", &zstd, data.len() - 1).unwrap(), Err(Stopped::TooLarge));

        let mut snappy = snap::raw::Encoder::new().compress_vec(&data).unwrap();
        snappy.extend_from_slice(&crc32fast::hash(&data).to_be_bytes());
        assert_eq!(avro_block("snappy", &snappy, data.len()).unwrap().unwrap(), data);
        assert_eq!(avro_block("snappy", &snappy, data.len() - 1).unwrap(), Err(Stopped::TooLarge));
        assert!(avro_block("bzip2", &snappy, 1).is_none());

        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&data).unwrap();
        let gz = gz.finish().unwrap();
        let mut out = Vec::new();
        read_capped(flate2::read::GzDecoder::new(&gz[..]), &mut out, data.len()).unwrap();
        assert_eq!(out, data);
        assert_eq!(
            read_capped(flate2::read::GzDecoder::new(&gz[..]), &mut out, data.len() - 1),
            Err(Stopped::TooLarge)
        );
    }

    /// A bomb of 64 KiB that would inflate to 8 GiB stops at the limit, quickly.
    #[test]
    fn a_zstd_bomb_stops_at_the_limit() {
        let bomb = zstd_bomb(65_536);
        assert!(bomb.len() < 300 * 1024);
        let limit = limit_bytes(bomb.len());
        assert_eq!(limit, INFLATE_FLOOR_BYTES);
        assert_eq!(avro_block("zstandard", &bomb, limit).unwrap(), Err(Stopped::TooLarge));
        // A small one inflates, to what it says.
        assert_eq!(avro_block("zstandard", &zstd_bomb(3), limit).unwrap().unwrap(), vec![b'x'; 3 * 128 * 1024]);
    }

    #[test]
    fn the_limit_is_a_ratio_with_a_floor() {
        assert_eq!(limit_bytes(0), INFLATE_FLOOR_BYTES);
        assert_eq!(limit_bytes(64 << 10), INFLATE_FLOOR_BYTES);
        assert_eq!(limit_bytes(10 << 20), 1000 << 20);
        assert_eq!(limit_bytes(usize::MAX), usize::MAX);
        assert!(bomb_message(1000).contains("refused as a decompression bomb"));
    }
}
