//! Executing a compaction plan: rewrite each group of small files with DuckDB, then commit one
//! `replace` snapshot that adds the new files and deletes the old ones.
//!
//! Safety rules:
//! - every output file must hold exactly the rows of its inputs less the deleted ones (checked
//!   before commit: rows and per-column non-null counts written plus those deleted, counted by a
//!   separate query, must equal the manifests' figures);
//! - a partition that live delete files apply to
//!   ([`crate::profile::PartitionProfile::applicable_delete_files`]: the partition's own
//!   deletes, global ones of an unpartitioned spec, position deletes naming one of its files) is
//!   rewritten with those deletes applied, as the spec says a reader applies them
//!   ([`deletes`]: position deletes by file path and row position when the data file's sequence
//!   number is at most the delete's, equality deletes by value, nulls equal, when it is below);
//!   with `apply_deletes := false`, or deletes it cannot apply (deletion vectors, ORC or Avro delete
//!   files, equality deletes on nested fields), the partition is skipped instead; the commit then
//!   removes the delete files that no longer apply to any live data file (dangling), and only
//!   those;
//! - new files take the data sequence number of the snapshot the rewrite started from (Java's
//!   `use-starting-sequence-number`), so an equality delete committed meanwhile still applies to
//!   exactly the rows it applied to;
//! - the commit is one new metadata file, made current atomically, and only on a table whose
//!   commits exclude other writers ([`crate::table::iceberg::commit::is_exclusive`]); if the table moved on
//!   while we rewrote, the commit is retried on the new head when every replaced file is still
//!   live there and no position delete added meanwhile can apply to one (Java's
//!   `validateNoNewDeletesForDataFiles`), otherwise it is abandoned with
//!   [`crate::error::ErrorKind::CommitConflict`];
//! - with `partial_progress` (the gate's default) the commit is one per batch of whole
//!   partitions, and a partition lost to a conflict is planned again on the new head and retried
//!   ([`progress`]); each batch's commit follows the rules above;
//! - the work answers an interrupt (Ctrl-C) between groups and before the commit;
//! - on any failure the files we wrote (data, manifests, manifest lists) are removed, so the table
//!   is exactly as it was; replaced files stay on disk for older snapshots until expiry.

pub mod batches;
pub mod defaults;
pub mod deletes;
pub mod deletion_vectors;
pub mod delta;
pub mod delta_columns;
pub mod delta_commit;
pub mod iceberg;
pub mod iceberg_commit;
pub mod iceberg_focus;
pub mod iceberg_nested_defaults;
pub mod iceberg_nested_fields;
pub mod iceberg_outputs;
pub mod progress;
pub mod run;
pub mod sql;
pub mod stats;
pub mod stitch;

use self::iceberg::IcebergRewrite;
pub(crate) use self::iceberg::merge_on_read_select;
pub use batches::PartitionOutcome;
pub(crate) use deletes::{DeleteSet, Input};
use run::run;
pub use run::{CompactionReport, GroupFiles};
pub(crate) use sql::{files_have_field_ids, select_sql};

use crate::duck::HostDb;
use crate::error::Result;
use crate::plan::compaction::CompactionOptions;
use crate::table::Table;

/// Plans, and (unless `dry_run`) rewrites and commits, on an Iceberg or a Delta table; with
/// `partial_progress`, in batches, partitions lost to a conflict planned again on the new head
/// ([`progress`]). `known_ratio`: the output bytes per input byte a previous plan measured (then
/// no sample is rewritten, and the plan is that plan's, table unchanged); `None` measures.
pub fn compact(
    table: &Table,
    options: &CompactionOptions,
    dry_run: bool,
    host: &HostDb,
    known_ratio: Option<f64>,
) -> Result<CompactionReport> {
    options.validate()?;
    let once = |table: &Table, options: &CompactionOptions, ratio: Option<f64>| -> Result<CompactionReport> {
        match table {
            Table::Iceberg { located, table } => {
                table.require_rewritable()?;
                let rewrite =
                    IcebergRewrite::new(located, table, &options.layout, Some(&options.verdict_thresholds()))?;
                run(&rewrite, options, dry_run, host, ratio)
            }
            Table::Delta(table) => {
                let rewrite = crate::action::compact::delta::DeltaRewrite::new(table, options)?;
                run(&rewrite, options, dry_run, host, ratio)
            }
        }
    };
    let report = once(table, options, known_ratio)?;
    if dry_run || !options.partial_progress {
        return Ok(report);
    }
    progress::retry_conflicts(table, options, report, &once)
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use ::iceberg::spec::{Datum, NestedField, PrimitiveType, Schema, Type};

    use super::{iceberg_commit::*, sql::*, stats::*};
    use crate::action::layout::OrderedRows;
    use crate::store::location_key;
    use crate::table::{DataFile, FileContent};

    fn dec(mantissa: i128, precision: u32, scale: u32) -> Datum {
        Datum::try_from_bytes(&mantissa.to_be_bytes(), PrimitiveType::Decimal { precision, scale }).unwrap()
    }

    #[test]
    fn bounds_only_from_exact_statistics() {
        let long = "z".repeat(DUCKDB_STRING_STATS_BYTES);
        let cases: Vec<(PrimitiveType, &str, bool, Option<Datum>)> = vec![
            (PrimitiveType::Long, "-42", false, Some(Datum::long(-42))),
            (PrimitiveType::Int, "7", true, Some(Datum::int(7))),
            (PrimitiveType::Date, "1970-01-02", false, Some(Datum::date(1))),
            (PrimitiveType::Timestamp, "1970-01-01 00:00:01.5", true, Some(Datum::timestamp_micros(1_500_000))),
            (PrimitiveType::String, "abc", true, Some(Datum::string("abc"))),
            (PrimitiveType::String, &long, false, Some(Datum::string(&long))),
            (PrimitiveType::String, &long, true, None),
            (PrimitiveType::Double, "1.5", false, Some(Datum::double(1.5))),
            (PrimitiveType::Double, "nan", true, None),
            (PrimitiveType::Float, "0.1", true, Some(Datum::float(0.1f32))),
            (PrimitiveType::Float, "-inf", false, Some(Datum::float(f32::NEG_INFINITY))),
            (PrimitiveType::Decimal { precision: 10, scale: 2 }, "-123.45", false, Some(dec(-12345, 10, 2))),
            (PrimitiveType::Decimal { precision: 10, scale: 2 }, "7.5", true, Some(dec(750, 10, 2))),
            (PrimitiveType::Decimal { precision: 38, scale: 0 }, "-7", true, Some(dec(-7, 38, 0))),
            (PrimitiveType::Decimal { precision: 10, scale: 2 }, "7.505", true, None),
            (PrimitiveType::Decimal { precision: 10, scale: 0 }, "1e5", true, None),
            (PrimitiveType::Long, "not a number", false, None),
            (PrimitiveType::Timestamptz, "1970-01-01 00:00:01.5+00", true, Some(Datum::timestamptz_micros(1_500_000))),
            (PrimitiveType::Timestamptz, "1970-01-01 00:00:01.5+02", true, None),
            (
                PrimitiveType::TimestampNs,
                "2026-01-01 00:00:00.12345679",
                true,
                Some(Datum::timestamp_nanos(1_767_225_600_123_456_790)),
            ),
            (PrimitiveType::TimestampNs, "1969-12-31 23:59:59.999999999", false, Some(Datum::timestamp_nanos(-1))),
            (PrimitiveType::TimestamptzNs, "1970-01-01 00:00:01.5+00", true, None),
            (PrimitiveType::Time, "01:00:00.25", false, Some(Datum::time_micros(3_600_250_000).unwrap())),
            (PrimitiveType::Boolean, "false", false, Some(Datum::bool(false))),
            (PrimitiveType::Boolean, "1", true, None),
            (PrimitiveType::Uuid, "5b846203-5359-4983-a277-d9fb77c1ba0a", true, None),
        ];
        for (ty, text, upper, want) in cases {
            assert_eq!(bound(&ty, text, upper), want, "{ty:?} {text:.10} upper={upper}");
        }
    }

    #[test]
    fn dangling_deletes_are_those_no_live_file_needs() {
        let data =
            |seq: i64| DataFile { data_sequence_number: seq, ..DataFile::for_tests("a=1", 1, FileContent::Data) };
        let (old, kept_old, newer) = (data(1), data(1), data(5));
        let equality =
            DataFile { data_sequence_number: 3, ..DataFile::for_tests("a=1", 1, FileContent::EqualityDeletes) };
        let position =
            DataFile { data_sequence_number: 3, ..DataFile::for_tests("a=1", 1, FileContent::PositionDeletes) };
        let candidate = |file: &DataFile, targets: Option<Vec<&DataFile>>| Candidate {
            file: file.clone(),
            targets: targets.map(|t| t.iter().map(|f| location_key(&f.path)).collect()),
            partitions: HashSet::new(),
        };
        let removed = |head: &[DataFile], replaced: &[&DataFile], candidates: &[Candidate]| -> Vec<String> {
            let replaced: HashSet<&str> = replaced.iter().map(|f| f.path.as_str()).collect();
            dangling_deletes(head, &replaced, candidates).into_iter().map(|c| c.file.path.clone()).collect()
        };
        let head = vec![old.clone(), kept_old.clone(), newer.clone(), equality.clone(), position.clone()];
        // The equality delete still applies to `kept_old` (seq 1 < 3), not to `newer` (5).
        let eq = [candidate(&equality, None)];
        assert!(removed(&head, &[&old], &eq).is_empty());
        assert_eq!(removed(&head, &[&old, &kept_old], &eq), vec![equality.path.clone()]);
        // The position delete names `old` only: dangling once `old` is replaced, whatever else lives.
        let pos = [candidate(&position, Some(vec![&old]))];
        assert_eq!(removed(&head, &[&old], &pos), vec![position.path.clone()]);
        let pos_both = [candidate(&position, Some(vec![&old, &kept_old]))];
        assert!(removed(&head, &[&old], &pos_both).is_empty());
        // Unknown targets: any live file of its scope and sequence range keeps it.
        assert!(removed(&head, &[&old], &[candidate(&position, None)]).is_empty());
        // A candidate no longer live on the head is not removed again.
        let without: Vec<DataFile> = head.iter().filter(|f| f.path != equality.path).cloned().collect();
        assert!(removed(&without, &[&old, &kept_old], &eq).is_empty());
    }

    #[test]
    fn zero_bounds_cover_both_signed_zeros() {
        assert!(float_bound::<f64>("0.0", false).unwrap().is_sign_negative());
        assert!(float_bound::<f64>("-0.0", true).unwrap().is_sign_positive());
        assert!(float_bound::<f32>("0", false).unwrap().is_sign_negative());
        assert_eq!(float_bound::<f64>("-2.5", false), Some(-2.5));
    }

    #[test]
    fn select_reads_by_field_id_only_when_files_have_ids() {
        let schema = Schema::builder()
            .with_fields(vec![
                NestedField::optional(1, "id", Type::Primitive(PrimitiveType::Long)).into(),
                NestedField::optional(2, "it's", Type::Primitive(PrimitiveType::String)).into(),
            ])
            .build()
            .unwrap();
        let by_id = select_sql(&schema, &["/d/a.parquet".into()], true, &Default::default()).unwrap();
        assert!(by_id.contains("schema = MAP {1: {name: 'id', type: 'BIGINT'"), "{by_id}");
        assert!(by_id.contains("\"it's\"") && by_id.contains("'it''s'"), "{by_id}");
        let by_name = OrderedRows {
            select: select_sql(&schema, &["/d/a.parquet".into()], false, &Default::default()).unwrap(),
            order: vec!["\"id\" DESC NULLS LAST".into()],
        }
        .sql();
        assert!(
            by_name.contains("union_by_name = true") && by_name.ends_with("ORDER BY \"id\" DESC NULLS LAST"),
            "{by_name}"
        );
    }
}
