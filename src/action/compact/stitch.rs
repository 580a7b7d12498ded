//! Row-group stitching: a compaction that copies its inputs' column chunks byte for byte into one
//! new file under a new footer, instead of decoding and re-encoding every value.
//!
//! Parquet allows it when the inputs agree on everything a column chunk's bytes depend on: the
//! schema (names, types, repetition, logical types, field ids) is the same in every input, so the
//! output's schema is theirs and every reader resolves its columns as it resolved each input's.
//! What a rewrite would change besides the bytes' layout must not be asked for: no delete to
//! apply, no sort, no row lineage to keep (a v3 row id or a Delta tracked row id derives from the
//! file's position in the table, which a new file changes), so `Footers::refusal` is asked only
//! where the format allows it. Row groups are kept as they are, so stitching is chosen only when
//! they are already of a useful size ([`MIN_MEAN_ROW_GROUP_BYTES`]); files of tiny row groups (a
//! streaming writer's) are re-encoded into large ones as before.
//!
//! The written file is checked like a re-encoded one (rows and per-column counts against the
//! table's metadata, by the format's rewrite) and, because no encoder produced it, page by page:
//! every page header where the new footer puts it, the pages filling each chunk with its number
//! of values, so that a column chunk its writer described wrongly fails the rewrite instead of
//! the readers. Page contents are the inputs' bytes, copied and length-checked.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::BufWriter;
use std::sync::Arc;

use parquet::basic::Compression;
use parquet::column::page::PageReader;
use parquet::column::writer::ColumnCloseResult;
use parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader};
use parquet::file::properties::WriterProperties;
use parquet::file::serialized_reader::SerializedPageReader;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::SchemaDescriptor;

use crate::error::{Error, ErrorKind, Result};

/// Stitching keeps the inputs' row groups: an input whose row groups average less than this
/// (compressed) is re-encoded instead, so that a compacted file never has more, smaller row
/// groups than DuckDB's own writer would give it (122,880 rows, typically a few MiB).
pub const MIN_MEAN_ROW_GROUP_BYTES: u64 = 2 * 1024 * 1024;

/// What the format requires of every input besides an identical schema.
#[derive(Debug, Clone, Default)]
pub(crate) struct Requirements {
    /// Every column must carry a Parquet field id (Iceberg: the output must read by id like the
    /// table's other files).
    pub field_ids: bool,
    /// Every column chunk must use this codec (the table's configured one, when it names one:
    /// `snappy`, `zstd`, … as [`codec_name`] gives them).
    pub codec: Option<&'static str>,
    /// The leaf columns every input must have, exactly, by their path (`s, x`; `l, list,
    /// element`): the current schema's, so the output is read and measured by today's names.
    pub leaf_paths: Option<HashSet<String>>,
    /// The top-level columns every input must have, exactly.
    pub top_level: Option<HashSet<String>>,
    /// Row groups of any size are kept (no [`MIN_MEAN_ROW_GROUP_BYTES`]): for a table whose
    /// columns only stitching rewrites faithfully (a Delta variant column), where the choice is
    /// between keeping small row groups in fewer files and not compacting at all.
    pub small_row_groups: bool,
    /// Top-level columns (by name in the files) that are or hold a variant: with `field_ids`,
    /// the `metadata`/`value`/`typed_value` leaves under them need none (readers resolve a
    /// variant's parts by name: Parquet's VariantEncoding, Iceberg's spec, Spark's files).
    pub variant_columns: HashSet<String>,
}

/// The lowercase name of a codec, as tables configure them.
pub(crate) fn codec_name(codec: Compression) -> &'static str {
    match codec {
        Compression::UNCOMPRESSED => "uncompressed",
        Compression::SNAPPY => "snappy",
        Compression::GZIP(_) => "gzip",
        Compression::LZO => "lzo",
        Compression::BROTLI(_) => "brotli",
        Compression::LZ4 => "lz4",
        Compression::ZSTD(_) => "zstd",
        Compression::LZ4_RAW => "lz4_raw",
    }
}

/// The footers read so far, by local path, so that the plan's check and the rewrite read each
/// file's footer once.
#[derive(Default)]
pub(crate) struct Footers {
    read: RefCell<HashMap<String, Arc<ParquetMetaData>>>,
}

impl Footers {
    /// The footer of the local Parquet file `path`.
    fn of(&self, path: &str) -> Result<Arc<ParquetMetaData>> {
        if let Some(footer) = self.read.borrow().get(path) {
            return Ok(footer.clone());
        }
        let file = File::open(path)?;
        let footer = ParquetMetaDataReader::new()
            .parse_and_finish(&file)
            .map_err(|e| Error::new(ErrorKind::CorruptMetadata, format!("reading the footer of '{path}': {e}")))?;
        let footer = Arc::new(footer);
        self.read.borrow_mut().insert(path.to_string(), footer.clone());
        Ok(footer)
    }

    /// The leaf column paths of the local Parquet file `path` (`v, typed_value, a, value`).
    pub(crate) fn leaf_paths(&self, path: &str) -> Result<Vec<Vec<String>>> {
        let footer = self.of(path)?;
        Ok(footer.file_metadata().schema_descr().columns().iter().map(|c| c.path().parts().to_vec()).collect())
    }

    /// The codec of the first column chunk of the local Parquet file `path` (what a file stitched
    /// from it is named after), if its footer reads.
    pub(crate) fn codec(&self, path: &str) -> Option<&'static str> {
        let footer = self.of(path).ok()?;
        let chunk = footer.row_groups().first()?.columns().first()?.compression();
        Some(codec_name(chunk))
    }

    /// Why the local Parquet files `inputs` cannot be stitched into one, or `None` when they can:
    /// one schema that meets `requirements`, row groups of a useful size, the required codec,
    /// consistent chunk offsets. (An encrypted footer does not parse; encrypted pages fail the
    /// page walk of [`Footers::stitch_into`].)
    pub(crate) fn refusal(&self, inputs: &[String], requirements: &Requirements) -> Option<String> {
        if inputs.len() < 2 {
            return Some("fewer than two files".into());
        }
        if let Some(remote) = inputs.iter().find(|p| crate::store::local_path(p).is_none()) {
            return Some(format!("'{remote}' is on object storage (stitching reads local files)"));
        }
        let mut schema = None;
        for path in inputs {
            let footer = match self.of(path) {
                Ok(footer) => footer,
                Err(e) => return Some(e.to_string()),
            };
            let metadata = footer.file_metadata();
            let root = metadata.schema_descr().root_schema();
            match schema {
                // The first file's schema is checked against the requirements; every other
                // file's must equal it.
                None => {
                    if let Some(why) = schema_refusal(path, metadata.schema_descr(), requirements) {
                        return Some(why);
                    }
                    schema = Some(root.clone());
                }
                Some(ref first) if first != root => return Some(format!("'{path}' has another Parquet schema")),
                Some(_) => {}
            }
            if metadata.num_rows() < 0 {
                return Some(format!("'{path}' has a negative row count"));
            }
            let groups = footer.row_groups();
            if groups.is_empty() {
                return Some(format!("'{path}' has no row group"));
            }
            let compressed: i64 = groups.iter().map(|g| g.compressed_size()).sum();
            if !requirements.small_row_groups
                && (compressed.max(0) as u64) < MIN_MEAN_ROW_GROUP_BYTES * groups.len() as u64
            {
                return Some(format!(
                    "'{path}' has row groups of {} KiB on average, below the {} MiB worth keeping",
                    compressed.max(0) as u64 / groups.len() as u64 / 1024,
                    MIN_MEAN_ROW_GROUP_BYTES >> 20
                ));
            }
            for chunk in groups.iter().flat_map(|g| g.columns()) {
                if let Some(codec) = requirements.codec
                    && codec_name(chunk.compression()) != codec
                {
                    return Some(format!(
                        "'{path}' is compressed with {}, the table asks for {codec}",
                        codec_name(chunk.compression())
                    ));
                }
                if !offsets_agree(chunk) {
                    return Some(format!("'{path}' describes column chunk '{}' inconsistently", chunk.column_path()));
                }
            }
        }
        None
    }

    /// Writes the row groups of `inputs` (checked by [`Footers::refusal`]), in order, into the one
    /// new local file of `targets`, column chunks copied byte for byte, and checks every page of
    /// it ([`verify_pages`]); returns its rows and bytes, as [`super::run::copy_in_order`] does.
    pub(crate) fn stitch_into(&self, inputs: &[String], targets: &[String]) -> Result<Vec<(u64, u64)>> {
        let [target] = targets else {
            return Err(Error::invalid("a stitched rewrite writes one file (this is a bug, please report it)"));
        };
        let (rows, bytes) = self.stitch(inputs, target)?;
        verify_pages(target)?;
        Ok(vec![(rows, bytes)])
    }

    /// Writes the row groups of `inputs`, in order, into the new local file `target`, column
    /// chunks copied byte for byte; returns its rows and bytes.
    fn stitch(&self, inputs: &[String], target: &str) -> Result<(u64, u64)> {
        let footers = inputs.iter().map(|p| self.of(p)).collect::<Result<Vec<_>>>()?;
        let first = footers.first().ok_or_else(|| Error::invalid("nothing to stitch"))?;
        let schema = first.file_metadata().schema_descr().root_schema_ptr();
        let key_values = first.file_metadata().key_value_metadata().cloned();
        let same_key_values = footers.iter().all(|f| f.file_metadata().key_value_metadata() == key_values.as_ref());
        let properties = WriterProperties::builder()
            .set_created_by(format!("lakehouse version {} (stitched)", env!("CARGO_PKG_VERSION")))
            .set_key_value_metadata(if same_key_values { key_values } else { None })
            .build();
        let out = File::create_new(target)?;
        let mut writer = SerializedFileWriter::new(BufWriter::new(out), schema, Arc::new(properties))
            .map_err(|e| stitch_error(target, e))?;
        let mut rows = 0u64;
        for (path, footer) in inputs.iter().zip(&footers) {
            let input = File::open(path)?;
            for group in footer.row_groups() {
                let mut row_group = writer.next_row_group().map_err(|e| stitch_error(target, e))?;
                for chunk in group.columns() {
                    let close = ColumnCloseResult {
                        bytes_written: chunk.compressed_size().max(0) as u64,
                        rows_written: group.num_rows().max(0) as u64,
                        metadata: chunk.clone(),
                        bloom_filter: None,
                        column_index: None,
                        offset_index: None,
                    };
                    row_group.append_column(&input, close).map_err(|e| stitch_error(path, e))?;
                }
                row_group.close().map_err(|e| stitch_error(target, e))?;
                rows += group.num_rows().max(0) as u64;
            }
        }
        let buffered = writer.into_inner().map_err(|e| stitch_error(target, e))?;
        let file = buffered.into_inner().map_err(|e| Error::from(e.into_error()))?;
        let bytes = file.metadata()?.len();
        Ok((rows, bytes))
    }
}

/// Whether a column chunk's offsets agree with each other: its pages (from its dictionary page,
/// when it has one, to the end of its data pages: what is copied) start past the file's magic
/// and hold its data page offset. Some writers put 0 in the dictionary offset for "none": such
/// files are re-encoded.
fn offsets_agree(chunk: &parquet::file::metadata::ColumnChunkMetaData) -> bool {
    let data = chunk.data_page_offset();
    let start = chunk.dictionary_page_offset().unwrap_or(data);
    let length = chunk.compressed_size();
    start >= 4 && data >= start && length > 0 && data < start + length
}

/// Why a file's schema `descr` does not meet `requirements` (field ids, the current schema's
/// leaf or top-level columns), if it does not.
fn schema_refusal(path: &str, descr: &SchemaDescriptor, requirements: &Requirements) -> Option<String> {
    if requirements.field_ids
        && let Some(column) = descr
            .columns()
            .iter()
            .find(|c| !c.self_type().get_basic_info().has_id() && !is_variant_part(c.path().parts(), requirements))
    {
        return Some(format!("'{path}' has no field id for column '{}'", column.path()));
    }
    let other_columns = || Some(format!("'{path}' has other columns than the table's current schema"));
    if let Some(wanted) = &requirements.leaf_paths {
        let leaves: HashSet<String> = descr.columns().iter().map(|c| c.path().parts().join(", ")).collect();
        if &leaves != wanted {
            return other_columns();
        }
    }
    if let Some(wanted) = &requirements.top_level {
        let top: HashSet<String> = descr.root_schema().get_fields().iter().map(|f| f.name().to_string()).collect();
        if &top != wanted {
            return other_columns();
        }
    }
    None
}

/// Whether the leaf column `parts` is part of a variant of `requirements.variant_columns`: under
/// such a column, with a `metadata`, `value` or `typed_value` step below its top level.
fn is_variant_part(parts: &[String], requirements: &Requirements) -> bool {
    match parts.split_first() {
        Some((top, below)) => {
            requirements.variant_columns.contains(top)
                && below.iter().any(|p| matches!(p.as_str(), "metadata" | "value" | "typed_value"))
        }
        None => false,
    }
}

fn stitch_error(path: &str, e: impl std::fmt::Display) -> Error {
    Error::new(ErrorKind::CorruptMetadata, format!("stitching row groups of '{path}': {e}; nothing was committed"))
}

/// Walks every page header of every column chunk of the stitched file `path`, where its new
/// footer says the chunk starts (no page is decompressed: the pages' bytes are the inputs'
/// own): each header must parse, the pages must fill the chunk, and the data pages must hold the
/// chunk's number of values. What stitching itself could get wrong is where chunks and pages
/// are; this finds any such mistake before a reader would.
fn verify_pages(path: &str) -> Result<()> {
    let file = Arc::new(File::open(path)?);
    let footer = ParquetMetaDataReader::new().parse_and_finish(file.as_ref()).map_err(|e| stitch_error(path, e))?;
    for group in footer.row_groups() {
        for chunk in group.columns() {
            if !offsets_agree(chunk) {
                return Err(stitch_error(
                    path,
                    format!("column chunk '{}' has inconsistent offsets", chunk.column_path()),
                ));
            }
            // The codec is never used (nothing is decompressed), and may not be built in.
            let plain = chunk
                .clone()
                .into_builder()
                .set_compression(Compression::UNCOMPRESSED)
                .build()
                .map_err(|e| stitch_error(path, e))?;
            let rows = group.num_rows().max(0) as usize;
            let mut pages =
                SerializedPageReader::new(file.clone(), &plain, rows, None).map_err(|e| stitch_error(path, e))?;
            let mut values = 0i64;
            while let Some(page) = pages.peek_next_page().map_err(|e| stitch_error(path, e))? {
                if !page.is_dict {
                    values += page.num_levels.unwrap_or(0) as i64;
                }
                pages.skip_next_page().map_err(|e| stitch_error(path, e))?;
            }
            if values != chunk.num_values() {
                return Err(stitch_error(
                    path,
                    format!(
                        "column chunk '{}' holds pages of {values} values, its footer says {}",
                        chunk.column_path(),
                        chunk.num_values()
                    ),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
    use parquet::arrow::ArrowWriter;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    use parquet::file::properties::WriterProperties;

    use super::*;

    /// Writes `rows` rows (ids from `start`, a 64-byte random-ish payload each) in row groups of
    /// `per_group` rows; with `extra`, a third column.
    fn write(dir: &std::path::Path, name: &str, start: i64, rows: i64, per_group: usize, extra: bool) -> String {
        let ids: ArrayRef = Arc::new(Int64Array::from_iter_values(start..start + rows));
        let payload: ArrayRef = Arc::new(StringArray::from_iter_values(
            (start..start + rows).map(|i| format!("{:064x}", (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15))),
        ));
        let mut columns = vec![("id", ids), ("payload", payload)];
        if extra {
            columns.push(("more", Arc::new(Int64Array::from_iter_values(0..rows)) as ArrayRef));
        }
        let batch = RecordBatch::try_from_iter(columns).unwrap();
        let path = dir.join(name).to_string_lossy().into_owned();
        let properties = WriterProperties::builder().set_max_row_group_row_count(Some(per_group)).build();
        let mut writer = ArrowWriter::try_new(File::create(&path).unwrap(), batch.schema(), Some(properties)).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
        path
    }

    /// A fresh directory, removed when dropped.
    struct Scratch(std::path::PathBuf);
    impl Scratch {
        fn path(&self) -> &std::path::Path {
            &self.0
        }
    }
    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    fn scratch() -> Scratch {
        let dir = std::env::temp_dir().join(format!("lakehouse-stitch-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    fn ids(path: &str) -> Vec<i64> {
        let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(path).unwrap()).unwrap().build().unwrap();
        let mut out = Vec::new();
        for batch in reader {
            let batch = batch.unwrap();
            let column = batch.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
            out.extend(column.values().iter().copied());
        }
        out
    }

    #[test]
    fn row_groups_are_copied_in_order_and_read_back_by_another_reader() {
        let dir = scratch();
        let a = write(dir.path(), "a.parquet", 0, 80_000, 40_000, false);
        let b = write(dir.path(), "b.parquet", 80_000, 60_000, 60_000, false);
        let footers = Footers::default();
        let inputs = vec![a.clone(), b.clone()];
        assert_eq!(footers.refusal(&inputs, &Requirements::default()), None);
        let target = dir.path().join("out.parquet").to_string_lossy().into_owned();
        let (rows, bytes) = footers.stitch(&inputs, &target).unwrap();
        assert_eq!((rows, bytes), (140_000, std::fs::metadata(&target).unwrap().len()));
        assert_eq!(ids(&target), (0..140_000).collect::<Vec<i64>>());
        let written = ParquetMetaDataReader::new().parse_and_finish(&File::open(&target).unwrap()).unwrap();
        assert_eq!(written.num_row_groups(), 3);
        // Never over an existing file.
        assert!(footers.stitch(&inputs, &target).is_err());
        verify_pages(&target).unwrap();
        // A page header that does not parse where the footer puts it is found.
        let chunk = written.row_group(1).column(1).clone();
        let mut bytes = std::fs::read(&target).unwrap();
        let at = chunk.data_page_offset() as usize;
        bytes[at..at + 16].fill(0xff);
        let broken = dir.path().join("broken.parquet").to_string_lossy().into_owned();
        std::fs::write(&broken, bytes).unwrap();
        let error = verify_pages(&broken).unwrap_err().to_string();
        assert!(error.contains("stitching row groups of") && error.contains("broken.parquet"), "{error}");
    }

    #[test]
    fn refuses_what_it_cannot_copy_safely() {
        let dir = scratch();
        let a = write(dir.path(), "a.parquet", 0, 40_000, 40_000, false);
        let b = write(dir.path(), "b.parquet", 0, 40_000, 40_000, false);
        let tiny = write(dir.path(), "tiny.parquet", 0, 40_000, 1_000, false);
        let wider = write(dir.path(), "wider.parquet", 0, 40_000, 40_000, true);
        let footers = Footers::default();
        let refusal = |inputs: &[&String], requirements: &Requirements| {
            let inputs: Vec<String> = inputs.iter().map(|s| s.to_string()).collect();
            footers.refusal(&inputs, requirements).unwrap_or_default()
        };
        let none = Requirements::default();
        assert!(refusal(&[&a, &tiny], &none).contains("KiB on average"), "{}", refusal(&[&a, &tiny], &none));
        let small = Requirements { small_row_groups: true, ..Requirements::default() };
        assert_eq!(refusal(&[&a, &tiny], &small), "");
        assert!(refusal(&[&a, &wider], &none).contains("another Parquet schema"));
        assert!(refusal(&[&a], &none).contains("fewer than two"));
        let ids = Requirements { field_ids: true, ..Requirements::default() };
        assert!(refusal(&[&a, &b], &ids).contains("no field id"));
        // Only a variant's parts are let off, not a plain column of the same name.
        let variant = |name: &str| HashSet::from([name.to_string()]);
        let ids_but_variant = Requirements { variant_columns: variant("payload"), ..ids.clone() };
        assert!(refusal(&[&a, &b], &ids_but_variant).contains("no field id for column '\"id\"'"));
        let strings = |parts: &[&str]| parts.iter().map(|p| p.to_string()).collect::<Vec<_>>();
        assert!(is_variant_part(
            &strings(&["v", "value"]),
            &Requirements { variant_columns: variant("v"), ..ids.clone() }
        ));
        assert!(is_variant_part(
            &strings(&["s", "v", "typed_value", "a", "value"]),
            &Requirements { variant_columns: variant("s"), ..ids.clone() }
        ));
        assert!(!is_variant_part(&strings(&["v"]), &Requirements { variant_columns: variant("v"), ..ids.clone() }));
        assert!(!is_variant_part(
            &strings(&["w", "value"]),
            &Requirements { variant_columns: variant("v"), ..ids.clone() }
        ));
        let zstd = Requirements { codec: Some("zstd"), ..Requirements::default() };
        assert!(refusal(&[&a, &b], &zstd).contains("compressed with uncompressed"));
        let columns = |names: &[&str]| Some(names.iter().map(|n| n.to_string()).collect::<HashSet<String>>());
        let top = Requirements { top_level: columns(&["id", "payload", "gone"]), ..Requirements::default() };
        assert!(refusal(&[&a, &b], &top).contains("other columns"));
        let leaves = Requirements { leaf_paths: columns(&["id", "payload"]), ..Requirements::default() };
        assert_eq!(refusal(&[&a, &b], &leaves), "");
        let remote = "s3://bucket/x.parquet".to_string();
        assert!(refusal(&[&a, &remote], &none).contains("object storage"));
        std::fs::write(dir.path().join("bad.parquet"), b"PAR1 not a footer PAR1").unwrap();
        let bad = dir.path().join("bad.parquet").to_string_lossy().into_owned();
        assert!(refusal(&[&a, &bad], &none).contains("reading the footer"));
    }
}
