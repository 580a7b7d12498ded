//! Scalar `lakehouse_compact(table [, options_json])` → a JSON summary, one compaction per row.
//!
//! Volatile (never constant-folded), so one query can maintain many tables:
//! `SELECT t, lakehouse_compact(t, '{"dry_run": true}') FROM (VALUES ('a.b'), ('a.c')) v(t)`.
//! The options are the table function's named parameters as a JSON object. A row that fails is
//! an error in its JSON, and a NULL gives NULL ([`super::json_options::invoke_per_row`]); an
//! option of the other format only is ignored with a warning ([`crate::plan::format_options`]).

use duckdb::core::DataChunkHandle;
use duckdb::vscalar::{ScalarFunctionSignature, VScalar};
use duckdb::vtab::arrow::WritableVector;
use serde_json::{Value, json};

use super::json_options::{JsonOptions, NamedScalar, invoke_per_row, table_and_options_signatures};
use super::options::compact::{CompactOptions, compact_options, compact_parameters};
use crate::action::compact::{CompactionReport, compact};
use crate::duck::HostDb;
use crate::error::Result;
use crate::plan::compaction::Verdict;

/// The scalar compaction function.
pub struct CompactScalar;

/// Parses the options JSON (absent → defaults): the table function's named parameters but the
/// executor's, read by the same parser ([`compact_options`]).
pub fn parse_options(options: Option<&str>) -> Result<CompactOptions> {
    compact_options(&JsonOptions::parse(options, &compact_parameters(false))?)
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
        "rows_purged": compacting.iter().map(|p| p.rows_purged).sum::<u64>(),
        "output_size_ratio": report.output_ratio,
        "strategy": report.layout.label(),
        "warning": report.warning,
        "partitions": report.plans.iter().map(|p| (p, report.method(&p.key))).map(|(p, (method, method_reason))| json!({
            "partition": p.partition,
            "spec_id": p.spec_id,
            "verdict": p.verdict.as_str(),
            "reason": p.reason,
            "files_before": p.files_before,
            "files_after": p.files_after(),
            "method": method,
            "method_reason": method_reason,
            "commit": report.outcomes.get(&p.key).map(|o| o.describe()),
        })).collect::<Vec<_>>(),
    })
}

impl NamedScalar for CompactScalar {
    const NAME: &'static str = "lakehouse_compact";
}

impl VScalar for CompactScalar {
    type State = HostDb;

    fn invoke(
        host: &Self::State,
        input: &mut DataChunkHandle,
        output: &mut dyn WritableVector,
    ) -> std::result::Result<(), Box<dyn std::error::Error>> {
        invoke_per_row(Self::NAME, input, output, |name, options| {
            let options = parse_options(options)?;
            let table = crate::table::Table::open(name, &options.locate)?;
            let mut report = compact(&table, &options.compaction, options.dry_run, host, None)?;
            if let Some(ignored) = options.format_only.warning(table.format()) {
                report.warning = Some(match report.warning.take() {
                    Some(w) => format!("{ignored}; {w}"),
                    None => ignored,
                });
            }
            Ok(summary_json(name, &report))
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
    use crate::plan::compaction::CompactionOptions;
    use crate::plan::format_options::FormatOnly;

    #[test]
    fn options_parse_and_validate() {
        let parsed = parse_options(Some(r#"{"dry_run": true, "min_input_files": 3, "partitions": ["a=1"]}"#)).unwrap();
        assert!(parsed.dry_run);
        assert_eq!(parsed.compaction.min_input_files, 3);
        assert_eq!(parsed.compaction.partitions, Some(vec!["a=1".to_string()]));
        let defaults = parse_options(None).unwrap();
        assert_eq!(defaults.compaction, CompactionOptions::default());
        assert!(!defaults.dry_run);
        assert_eq!(defaults.format_only, FormatOnly::default());
        let recent = parse_options(Some(r#"{"skip_recent_partitions": "1 day", "sort_order": null}"#)).unwrap();
        assert_eq!(recent.format_only, FormatOnly::given(|key| key == "skip_recent_partitions"));
        for bad in [
            "[1]",
            "{",
            r#"{"bogus": 1}"#,
            r#"{"dry_run": "yes"}"#,
            r#"{"min_input_files": 1}"#,
            r#"{"min_input_files": 2.5}"#,
            r#"{"small_file_threshold_mb": -1}"#,
            r#"{"partitions": [1]}"#,
            r#"{"max_commits": 1000001}"#,
        ] {
            assert!(parse_options(Some(bad)).is_err(), "{bad}");
        }
    }
}
