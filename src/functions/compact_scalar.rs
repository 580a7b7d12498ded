//! Scalar `lakehouse_compact(table [, options_json])` → a JSON summary, one compaction per row.
//!
//! Volatile (never constant-folded), so one query can maintain many tables:
//! `SELECT t, lakehouse_compact(t, '{"dry_run": true}') FROM (VALUES ('a.b'), ('a.c')) v(t)`.
//! The options are the table function's named parameters as a JSON object.

use duckdb::core::{DataChunkHandle, Inserter, LogicalTypeHandle, LogicalTypeId};
use duckdb::types::DuckString;
use duckdb::vscalar::{ScalarFunctionSignature, VScalar};
use duckdb::vtab::arrow::WritableVector;
use serde_json::{Map, Value, json};

use crate::action::compact::{CompactionReport, compact};
use crate::duck::HostDb;
use crate::error::{Error, Result};
use crate::plan::compaction::{CompactionOptions, Verdict};
use crate::profile::Thresholds;
use crate::table::LocateOptions;
use crate::table::catalog::CatalogOptions;

const NAME: &str = "lakehouse_compact";
const KEYS: [&str; 10] = [
    "small_file_threshold_mb",
    "fragmentation_ratio_threshold",
    "target_file_size_mb",
    "min_input_files",
    "partitions",
    "dry_run",
    "latest_metadata",
    "catalog",
    "catalog_uri",
    "warehouse",
];

/// The scalar compaction function.
pub struct CompactScalar;

fn number(map: &Map<String, Value>, key: &str, default: f64) -> Result<f64> {
    match map.get(key) {
        None => Ok(default),
        Some(v) => v.as_f64().ok_or_else(|| Error::invalid(format!("{key} must be a number, got {v}"))),
    }
}

fn boolean(map: &Map<String, Value>, key: &str, default: bool) -> Result<bool> {
    match map.get(key) {
        None => Ok(default),
        Some(v) => v.as_bool().ok_or_else(|| Error::invalid(format!("{key} must be a boolean, got {v}"))),
    }
}

fn text(map: &Map<String, Value>, key: &str) -> Result<Option<String>> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(Error::invalid(format!("{key} must be a string"))),
    }
}

/// Parses the options JSON (absent or NULL → defaults).
pub fn parse_options(options: Option<&str>) -> Result<(LocateOptions, CompactionOptions, bool)> {
    let map = match options {
        None => Map::new(),
        Some(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(map)) => map,
            Ok(other) => return Err(Error::invalid(format!("options must be a JSON object, got {other}"))),
            Err(e) => return Err(Error::invalid(format!("options are not valid JSON: {e}"))),
        },
    };
    if let Some(unknown) = map.keys().find(|k| !KEYS.contains(&k.as_str())) {
        return Err(Error::invalid(format!("unknown option '{unknown}'; known options: {}", KEYS.join(", "))));
    }
    let min_input_files = number(&map, "min_input_files", 2.0)?;
    if min_input_files.fract() != 0.0 || min_input_files < 2.0 {
        return Err(Error::invalid(format!("min_input_files must be an integer of at least 2, got {min_input_files}")));
    }
    let partitions = match map.get("partitions") {
        None | Some(Value::Null) => None,
        Some(Value::Array(items)) => Some(
            items
                .iter()
                .map(|i| i.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| Error::invalid("partitions must be a list of strings"))?,
        ),
        Some(_) => return Err(Error::invalid("partitions must be a list of strings")),
    };
    let options = CompactionOptions {
        thresholds: Thresholds::new(
            number(&map, "small_file_threshold_mb", 64.0)?,
            number(&map, "fragmentation_ratio_threshold", 0.35)?,
        )?,
        target_file_size_mb: number(&map, "target_file_size_mb", 128.0)?,
        min_input_files: min_input_files as u64,
        partitions,
    };
    options.validate()?;
    let locate = LocateOptions {
        latest_metadata: boolean(&map, "latest_metadata", false)?,
        catalog: CatalogOptions {
            name: text(&map, "catalog")?,
            uri: text(&map, "catalog_uri")?,
            warehouse: text(&map, "warehouse")?,
        },
    };
    Ok((locate, options, boolean(&map, "dry_run", false)?))
}

/// The JSON summary of a report.
pub fn summary_json(table: &str, report: &CompactionReport) -> Value {
    let compacting: Vec<_> = report.plans.iter().filter(|p| p.verdict == Verdict::Compact).collect();
    json!({
        "table": table,
        "dry_run": report.dry_run,
        "snapshot_id": report.snapshot_id,
        "metadata_location": report.metadata_location,
        "partitions_total": report.plans.len(),
        "partitions_compacted": compacting.len(),
        "files_rewritten": compacting.iter().map(|p| p.input_files()).sum::<u64>(),
        "files_written": compacting.iter().map(|p| p.groups.len() as u64).sum::<u64>(),
        "bytes_rewritten": compacting.iter().map(|p| p.bytes_to_rewrite).sum::<u64>(),
        "partitions": report.plans.iter().map(|p| json!({
            "partition": p.partition,
            "spec_id": p.spec_id,
            "verdict": p.verdict.as_str(),
            "reason": p.reason,
            "files_before": p.files_before,
            "files_after": p.files_after(),
        })).collect::<Vec<_>>(),
    })
}

fn read_text(input: &DataChunkHandle, column: usize, row: usize) -> Option<String> {
    let vector = input.flat_vector(column);
    if vector.row_is_null(row as u64) {
        return None;
    }
    let strings = unsafe { vector.as_slice_with_len::<duckdb::ffi::duckdb_string_t>(input.len()) };
    let mut raw = strings[row];
    Some(DuckString::new(&mut raw).as_str().into_owned())
}

impl VScalar for CompactScalar {
    type State = HostDb;

    fn invoke(
        host: &Self::State,
        input: &mut DataChunkHandle,
        output: &mut dyn WritableVector,
    ) -> std::result::Result<(), Box<dyn std::error::Error>> {
        let with_options = input.num_columns() > 1;
        let out = output.flat_vector();
        for row in 0..input.len() {
            let table = read_text(input, 0, row).ok_or_else(|| format!("{NAME}: table must not be NULL"))?;
            let options = if with_options { read_text(input, 1, row) } else { None };
            let result = parse_options(options.as_deref())
                .and_then(|(locate, opts, dry_run)| compact(&table, &locate, &opts, dry_run, host))
                .map_err(|e| format!("{NAME}: {e}"))?;
            out.insert(row, summary_json(&table, &result).to_string().as_str());
        }
        Ok(())
    }

    fn signatures() -> Vec<ScalarFunctionSignature> {
        let text = || LogicalTypeHandle::from(LogicalTypeId::Varchar);
        vec![
            ScalarFunctionSignature::exact(vec![text()], text()),
            ScalarFunctionSignature::exact(vec![text(), text()], text()),
        ]
    }

    fn volatile() -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_parse_and_validate() {
        let (_, opts, dry) =
            parse_options(Some(r#"{"dry_run": true, "min_input_files": 3, "partitions": ["a=1"]}"#)).unwrap();
        assert!(dry);
        assert_eq!(opts.min_input_files, 3);
        assert_eq!(opts.partitions, Some(vec!["a=1".to_string()]));
        let (_, defaults, dry) = parse_options(None).unwrap();
        assert_eq!(defaults, CompactionOptions::default());
        assert!(!dry);
        for bad in [
            "[1]",
            "{",
            r#"{"bogus": 1}"#,
            r#"{"dry_run": "yes"}"#,
            r#"{"min_input_files": 1}"#,
            r#"{"min_input_files": 2.5}"#,
            r#"{"small_file_threshold_mb": -1}"#,
            r#"{"partitions": [1]}"#,
        ] {
            assert!(parse_options(Some(bad)).is_err(), "{bad}");
        }
    }
}
