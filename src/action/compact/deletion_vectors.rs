//! Deletion vectors (Delta's, and Iceberg v3's) applied in a rewrite's own query: every vector
//! of the files read is read and checked ([`crate::table::delta::deletion_vector`],
//! [`crate::table::iceberg::deletion_vector`]), its row indexes are written to a temporary
//! Parquet file of `(file number, row index)`, and the query anti-joins the data files' rows on
//! DuckDB's `filename` and `file_row_number` (the physical row index a vector holds).
//!
//! The temporary file lives as long as `DeletedPositions` does (it is removed on drop, also
//! when the rewrite fails) and is never inside the table.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{Int32Array, Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema};

use crate::duck::{quote_file, quote_literal};
use crate::error::{Error, ErrorKind, Result};
use crate::table::delta::LiveFile;
use crate::table::delta::deletion_vector::DeletedRows;

/// Row indexes per Parquet batch of the positions file.
const BATCH_ROWS: usize = 1 << 16;

/// The deleted rows of a set of data files, as a temporary Parquet file the rewrite anti-joins.
pub(crate) struct DeletedPositions {
    /// The temporary file.
    file: PathBuf,
    /// The data files that have deleted rows, as DuckDB names them (`filename`), by number.
    data_files: Vec<String>,
    /// How many rows the vectors delete, in all.
    pub(crate) rows: u64,
}

impl DeletedPositions {
    /// Reads the deletion vectors of `files` (tables at `root`); `None` when none has one. A
    /// vector that is unreadable, fails a check, or deletes a row past its file's `numRecords`
    /// is an error: nothing is rewritten from it.
    pub(crate) fn of(root: &Path, files: &[&LiveFile]) -> Result<Option<Self>> {
        let mut vectors = Vec::new();
        for f in files {
            let Some(dv) = &f.remove.deletion_vector else { continue };
            let deleted = crate::table::delta::deletion_vector::read(root, dv)?;
            let path = f.local_path.to_string_lossy().into_owned();
            let records = f.num_records.ok_or_else(|| {
                Error::new(
                    ErrorKind::CorruptMetadata,
                    format!(
                        "'{path}' has a deletion vector but no numRecords statistic, so its rows cannot be checked; \
                         nothing was rewritten"
                    ),
                )
            })?;
            deleted.check_within(records, &path)?;
            vectors.push((path, deleted));
        }
        Self::from_rows(vectors)
    }

    /// The deleted rows `vectors` (each: a data file as DuckDB names it, `filename`, and its
    /// checked vector) as a positions file; `None` when there are none.
    pub(crate) fn from_rows(vectors: Vec<(String, DeletedRows)>) -> Result<Option<Self>> {
        if vectors.is_empty() {
            return Ok(None);
        }
        let file = std::env::temp_dir().join(format!("lakehouse-deleted-rows-{}.parquet", uuid::Uuid::new_v4()));
        let rows = vectors.iter().map(|(_, d)| d.rows.len()).sum();
        let positions = Self { file, data_files: vectors.iter().map(|(p, _)| p.clone()).collect(), rows };
        // Dropped on error: the partial file goes with it.
        positions.write(&vectors)?;
        Ok(Some(positions))
    }

    fn write(&self, vectors: &[(String, DeletedRows)]) -> Result<()> {
        let schema = Arc::new(Schema::new(vec![
            Field::new("__dv_file", DataType::Int32, false),
            Field::new("__dv_row", DataType::Int64, false),
        ]));
        let failed = |e: &dyn std::fmt::Display| {
            Error::new(ErrorKind::Io, format!("cannot write the deleted rows to '{}': {e}", self.file.display()))
        };
        let out = std::fs::File::create(&self.file).map_err(|e| failed(&e))?;
        let mut writer = parquet::arrow::ArrowWriter::try_new(out, schema.clone(), None).map_err(|e| failed(&e))?;
        for (number, (_, deleted)) in vectors.iter().enumerate() {
            let mut rows = deleted.rows.iter().peekable();
            while rows.peek().is_some() {
                let chunk: Vec<i64> = rows.by_ref().take(BATCH_ROWS).map(|r| r as i64).collect();
                let batch = RecordBatch::try_new(
                    schema.clone(),
                    vec![
                        Arc::new(Int32Array::from(vec![number as i32; chunk.len()])),
                        Arc::new(Int64Array::from(chunk)),
                    ],
                )
                .map_err(|e| failed(&e))?;
                writer.write(&batch).map_err(|e| failed(&e))?;
            }
        }
        writer.close().map_err(|e| failed(&e))?;
        Ok(())
    }

    /// The `ANTI JOIN` that drops the deleted rows of `data`, an alias of a `read_parquet` with
    /// `filename = '__lakehouse_file', file_row_number = true`.
    pub(crate) fn anti_join(&self, data: &str) -> String {
        format!(
            "ANTI JOIN {} AS __dv ON __dv.__dv_path = {data}.__lakehouse_file AND __dv.__dv_row = {data}.file_row_number",
            self.source_sql()
        )
    }

    /// The deleted rows as a subquery of `(__dv_path, __dv_row)`: the data file as DuckDB names
    /// it (`filename`) and the row index.
    pub(crate) fn source_sql(&self) -> String {
        let numbers: Vec<String> =
            self.data_files.iter().enumerate().map(|(i, f)| format!("({i}::INTEGER, {})", quote_literal(f))).collect();
        format!(
            "(SELECT __n.__file AS __dv_path, __p.__dv_row FROM read_parquet({}) AS __p \
             JOIN (VALUES {}) AS __n(__number, __file) ON __p.__dv_file = __n.__number)",
            quote_file(&self.file.to_string_lossy()),
            numbers.join(", ")
        )
    }
}

impl Drop for DeletedPositions {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.file);
    }
}
