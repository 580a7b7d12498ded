//! Scalar `lakehouse_expire_snapshots(table [, options_json])` → a JSON summary, one expiry per
//! row. Volatile, so one query can maintain many tables. The options are the table function's
//! named parameters as a JSON object. A row that fails is an error in its JSON, and a NULL gives
//! NULL ([`super::json_options::invoke_per_row`]).

use duckdb::core::DataChunkHandle;
use duckdb::vscalar::{ScalarFunctionSignature, VScalar};
use duckdb::vtab::arrow::WritableVector;
use serde_json::{Value, json};

use super::json_options::{JsonOptions, NamedScalar, invoke_per_row, table_and_options_signatures};
use super::options::expire::{expire_options, expire_parameters};
use crate::action::delete_files::Outcome;
use crate::action::expire_snapshots::{ExpiryOptions, ExpiryReport, expire};
use crate::duck::HostDb;
use crate::error::Result;
use crate::plan::expiry::FileKind;
use crate::table::LocateOptions;

/// The scalar expiry function.
pub struct ExpireScalar;

/// Parses the options JSON (absent or NULL → defaults): the table function's named parameters,
/// read by the same parser ([`expire_options`]).
pub fn parse_options(options: Option<&str>) -> Result<(LocateOptions, ExpiryOptions)> {
    expire_options(&JsonOptions::parse(options, &expire_parameters())?)
}

/// The JSON summary of a report.
pub fn summary_json(table: &str, report: &ExpiryReport) -> Value {
    let outside = report.files.iter().filter(|f| f.outcome == Outcome::OutsideLocation).count();
    let failed = report.files.iter().filter(|f| matches!(f.outcome, Outcome::Failed(_))).count();
    json!({
        "table": table,
        "dry_run": report.dry_run,
        "metadata_location": report.metadata_location,
        "snapshots_expired": report.expired.len(),
        "snapshots_retained": report.snapshots_retained,
        "expired_snapshot_ids": report.expired.iter().map(|s| s.snapshot_id).collect::<Vec<_>>(),
        "refs_removed": report.refs_removed,
        "partition_specs_removed": report.unused.specs,
        "schemas_removed": report.unused.schemas,
        "manifest_lists_deleted": report.count(FileKind::ManifestList),
        "manifests_deleted": report.count(FileKind::Manifest),
        "data_files_deleted": report.count(FileKind::DataFile),
        "delete_files_deleted": report.count(FileKind::DeleteFile),
        "statistics_files_deleted": report.count(FileKind::StatisticsFile),
        "metadata_files_deleted": report.count(FileKind::MetadataFile),
        "bytes_reclaimed": report.reclaimed_bytes(),
        "files_outside_location_kept": outside,
        "files_failed_to_delete": failed,
        "warning": report.warning,
    })
}

impl NamedScalar for ExpireScalar {
    const NAME: &'static str = "lakehouse_expire_snapshots";
}

impl VScalar for ExpireScalar {
    type State = HostDb;

    fn invoke(
        _host: &Self::State,
        input: &mut DataChunkHandle,
        output: &mut dyn WritableVector,
    ) -> std::result::Result<(), Box<dyn std::error::Error>> {
        invoke_per_row(Self::NAME, input, output, |table, options| {
            let (locate, expiry) = parse_options(options)?;
            Ok(summary_json(table, &expire(&crate::table::locate(table, &locate)?, &expiry)?))
        })
    }

    fn signatures() -> Vec<ScalarFunctionSignature> {
        table_and_options_signatures()
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
        let (_, expiry) =
            parse_options(Some(r#"{"snapshot_retention_days": 0.5, "retain_last": 3, "dry_run": true}"#)).unwrap();
        let want =
            ExpiryOptions { retention_days: Some(0.5), retain_last: Some(3), dry_run: true, ..Default::default() };
        assert_eq!(expiry, want);
        let (_, clean) = parse_options(Some(r#"{"clean_expired_metadata": true}"#)).unwrap();
        assert!(clean.clean_expired_metadata);
        let (_, defaults) = parse_options(None).unwrap();
        assert_eq!(defaults, ExpiryOptions::default());
        for bad in [
            r#"{"snapshot_retention_days": -1}"#,
            r#"{"retain_last": 0}"#,
            r#"{"retain_last": 1.5}"#,
            r#"{"dry_run": null}"#,
            r#"{"older_than": 3}"#,
            "[]",
        ] {
            assert!(parse_options(Some(bad)).is_err(), "{bad}");
        }
    }
}
