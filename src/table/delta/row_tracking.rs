//! Row tracking (PROTOCOL.md, "Row Tracking"): what a rewrite needs to keep every row's id and
//! commit version.
//!
//! A row's id is its file's materialized row-id column where that is not null, else the file's
//! `baseRowId` plus the row's physical index; its commit version likewise the materialized
//! row-commit-version column, else the file's `defaultRowCommitVersion`. The table's
//! `delta.rowTracking` domain holds `rowIdHighWaterMark`, the highest id handed out; a writer
//! gives new files `baseRowId`s above it and raises it in the same commit.

use std::collections::HashMap;
use std::path::Path;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{Array, RecordBatch};
use deltalake_core::DeltaTable;
use futures::TryStreamExt;
use serde_json::Value;

use crate::error::{Error, ErrorKind, Result};

/// The domain that holds the high-water mark.
pub const DOMAIN: &str = "delta.rowTracking";

/// A table's row tracking, as its metadata and log say.
#[derive(Debug, Clone, PartialEq)]
pub struct RowTracking {
    /// The materialized row-id column's name in the files.
    pub row_id_column: String,
    /// The materialized row-commit-version column's name in the files.
    pub commit_version_column: String,
    /// The highest row id handed out (`None`: none yet).
    pub high_water_mark: Option<i64>,
}

/// Per live file (path as delta-rs decodes it): `baseRowId` and `defaultRowCommitVersion`.
pub type FileRowIds = HashMap<String, (Option<i64>, Option<i64>)>;

/// The materialized row-id and row-commit-version column names the metadata `configuration`
/// gives, when it gives both (the table tracks row ids).
pub fn columns(configuration: &Value) -> Option<(String, String)> {
    let name = |key: &str| configuration.get(key).and_then(Value::as_str).map(str::to_string);
    Some((
        name("delta.rowTracking.materializedRowIdColumnName")?,
        name("delta.rowTracking.materializedRowCommitVersionColumnName")?,
    ))
}

/// Reads `table`'s row tracking: the materialized `columns`, the high-water mark from the
/// [`DOMAIN`] configuration (`None`: the log has none yet), and every live file's ids.
pub async fn read(
    table: &DeltaTable,
    (row_id_column, commit_version_column): (String, String),
    domain: Option<&String>,
    root: &Path,
) -> Result<(RowTracking, FileRowIds)> {
    let fail = |e: &dyn std::fmt::Display| {
        Error::new(
            ErrorKind::CorruptMetadata,
            format!("Delta table '{}': cannot read its row tracking: {e}", root.display()),
        )
    };
    let state = table.snapshot().map_err(|e| fail(&e))?;
    let log_store = table.log_store();
    let version = state.version() as deltalake_core::kernel::Version;
    let high_water_mark = match domain {
        None => None,
        Some(text) => {
            let config: Value = serde_json::from_str(text).map_err(|e| fail(&e))?;
            Some(
                config
                    .get("rowIdHighWaterMark")
                    .and_then(Value::as_i64)
                    .ok_or_else(|| fail(&format!("the {DOMAIN} domain has no rowIdHighWaterMark ({text})")))?,
            )
        }
    };
    // delta-rs's file views do not show baseRowId; its log replay's own batches do.
    let snapshot =
        deltalake_core::kernel::Snapshot::try_new(log_store.as_ref(), state.load_config().clone(), Some(version))
            .await
            .map_err(|e| fail(&e))?;
    let batches: Vec<RecordBatch> =
        snapshot.files(log_store.as_ref(), None).try_collect().await.map_err(|e| fail(&e))?;
    let mut ids = FileRowIds::new();
    for batch in &batches {
        file_row_ids(batch, &mut ids).map_err(|e| fail(&e))?;
    }
    Ok((RowTracking { row_id_column, commit_version_column, high_water_mark }, ids))
}

/// The (decoded path, baseRowId, defaultRowCommitVersion) of each file of a batch of delta-rs's
/// live files (`path`, `fileConstantValues`).
fn file_row_ids(batch: &RecordBatch, out: &mut FileRowIds) -> std::result::Result<(), String> {
    let paths = batch.column_by_name("path").ok_or("no path column")?;
    let constants = batch
        .column_by_name("fileConstantValues")
        .and_then(|c| c.as_struct_opt())
        .ok_or("no fileConstantValues column")?;
    let longs = |name: &str| constants.column_by_name(name).and_then(|c| c.as_primitive_opt::<Int64Type>());
    let (base, version) = (longs("baseRowId"), longs("defaultRowCommitVersion"));
    for row in 0..batch.num_rows() {
        let raw = if let Some(a) = paths.as_string_opt::<i32>() {
            a.value(row)
        } else if let Some(a) = paths.as_string_opt::<i64>() {
            a.value(row)
        } else if let Some(a) = paths.as_string_view_opt() {
            a.value(row)
        } else {
            return Err("path is not a string column".into());
        };
        let path = percent_encoding::percent_decode_str(raw).decode_utf8_lossy().into_owned();
        let get =
            |a: Option<&arrow_array::PrimitiveArray<Int64Type>>| a.filter(|a| a.is_valid(row)).map(|a| a.value(row));
        out.insert(path, (get(base), get(version)));
    }
    Ok(())
}
