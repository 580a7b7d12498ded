//! `lakehouse_metadata_health(table, snapshot_retention_days := 7, retain_last := 1,
//! older_than_days := 3, …)`: one row of metadata-bloat figures and the verdict.

use duckdb::core::{LogicalTypeHandle, LogicalTypeId};

use super::args::{Args, TABLE_PARAMETERS, named};
use super::options::expire::{EXPIRY_PARAMETERS, expiry_options};
use super::options::orphans::older_than_days;
use super::options::source::OptionSource;
use super::{Cell, RowFunction};
use crate::action::metadata_health::{HealthOptions, metadata_health};
use crate::duck::HostDb;
use crate::error::Result;
use crate::profile::round_to;
use crate::table::LocateOptions;

/// The fields of the `delta_log` column: the figures of a Delta table's `_delta_log` and of what
/// VACUUM would do, grouped so that an Iceberg table shows one NULL instead of nine.
const DELTA_LOG_FIELDS: [(&str, LogicalTypeId); 9] = {
    use LogicalTypeId::*;
    [
        ("commits_since_checkpoint", Bigint),
        ("last_checkpoint_version", Bigint),
        ("checkpoint_age_days", Double),
        ("log_retention_days", Double),
        ("deleted_file_retention_hours", Double),
        ("tombstones", Bigint),
        ("expired_tombstones", Bigint),
        ("vacuumable_files", Bigint),
        ("vacuumable_bytes", Bigint),
    ]
};

/// Parsed arguments.
pub struct HealthInput {
    table: String,
    locate: LocateOptions,
    options: HealthOptions,
}

/// The metadata-health table function.
pub struct MetadataHealthFn;

fn ms_to_micros(ms: Option<i64>) -> Cell {
    ms.map_or(Cell::Null, |ms| Cell::Timestamp(ms.saturating_mul(1000)))
}

fn opt_text(text: Option<String>) -> Cell {
    text.map_or(Cell::Null, Cell::Text)
}

fn opt_big(n: Option<u64>) -> Cell {
    n.map_or(Cell::Null, |n| Cell::BigInt(n as i64))
}

impl RowFunction for MetadataHealthFn {
    const NAME: &'static str = "lakehouse_metadata_health";
    type Input = HealthInput;

    fn named_parameters() -> Vec<(String, LogicalTypeHandle)> {
        let mut names = EXPIRY_PARAMETERS.to_vec();
        names.push("older_than_days");
        names.extend(TABLE_PARAMETERS);
        named(&names)
    }

    fn columns() -> Vec<(&'static str, LogicalTypeId)> {
        use LogicalTypeId::*;
        vec![
            ("snapshots", Bigint),
            ("oldest_snapshot_at", Timestamp),
            ("newest_snapshot_at", Timestamp),
            ("snapshot_age_span_days", Double),
            ("snapshot_retention_days", Double),
            ("snapshots_past_retention", Bigint),
            ("expirable_snapshots", Bigint),
            ("refs", Bigint),
            ("manifests", Bigint),
            ("small_manifests", Bigint),
            ("manifest_bytes", Bigint),
            ("metadata_files", Bigint),
            ("metadata_bytes", Bigint),
            ("metadata_log_entries", Bigint),
            ("unlogged_metadata_files", Bigint),
            ("data_files", Bigint),
            ("position_delete_files", Bigint),
            ("equality_delete_files", Bigint),
            ("orphan_files", Bigint),
            ("orphan_bytes", Bigint),
            ("missing_metadata_files", Bigint),
            ("requires_expiry", Boolean),
            ("requires_orphan_cleanup", Boolean),
            ("metadata_bloated", Boolean),
            ("reason", Varchar),
            ("format", Varchar),
            // Delta Lake's log, one STRUCT (NULL for Iceberg): [`DELTA_LOG_FIELDS`].
            ("delta_log", Struct),
            // What maintenance the table blocks and why (NULL: nothing), not an error.
            ("compaction_blocked_by", Varchar),
            ("cleanup_blocked_by", Varchar),
        ]
    }

    fn struct_fields(_column: &str) -> Vec<(&'static str, LogicalTypeId)> {
        DELTA_LOG_FIELDS.to_vec()
    }

    fn parse(args: &Args) -> Result<Self::Input> {
        let table = args.required_string(0, "table")?;
        let options = HealthOptions { expiry: expiry_options(args, true)?, older_than_days: older_than_days(args)? };
        Ok(HealthInput { table, locate: args.locate_options()?, options })
    }

    fn run(input: &Self::Input, host: &HostDb) -> Result<Vec<Vec<Cell>>> {
        let h = metadata_health(&input.table, &input.locate, &input.options, host)?;
        let span_days = match (h.oldest_snapshot_ms, h.newest_snapshot_ms) {
            (Some(a), Some(b)) => Cell::Double(round_to((b - a) as f64 / 86_400_000.0, 2)),
            _ => Cell::Null,
        };
        let reason = if h.reasons.is_empty() { "healthy".to_string() } else { h.reasons.join("; ") };
        let big = |n: u64| Cell::BigInt(n as i64);
        Ok(vec![vec![
            big(h.snapshots),
            ms_to_micros(h.oldest_snapshot_ms),
            ms_to_micros(h.newest_snapshot_ms),
            span_days,
            Cell::Double(h.retention_days),
            big(h.snapshots_past_retention),
            big(h.expirable_snapshots),
            big(h.refs),
            big(h.manifests),
            big(h.small_manifests),
            big(h.manifest_bytes),
            big(h.metadata_files),
            big(h.metadata_bytes),
            big(h.metadata_log_entries),
            big(h.unlogged_metadata_files),
            big(h.data_files),
            big(h.position_delete_files),
            big(h.equality_delete_files),
            opt_big(h.orphan_files),
            opt_big(h.orphan_bytes),
            big(h.missing_metadata_files),
            Cell::Bool(h.requires_expiry()),
            Cell::Bool(h.requires_orphan_cleanup()),
            Cell::Bool(h.metadata_bloated()),
            Cell::Text(reason),
            h.format.map_or(Cell::Null, |f| Cell::Text(f.as_str().into())),
            opt_big(h.delta.as_ref().map(|d| d.commits_since_checkpoint)),
            h.delta.as_ref().and_then(|d| d.last_checkpoint_version).map_or(Cell::Null, Cell::BigInt),
            h.delta.as_ref().and_then(|d| d.checkpoint_age_days).map_or(Cell::Null, |d| Cell::Double(round_to(d, 2))),
            h.delta.as_ref().map_or(Cell::Null, |d| Cell::Double(d.log_retention_days)),
            h.delta.as_ref().map_or(Cell::Null, |d| Cell::Double(d.deleted_file_retention_hours)),
            opt_big(h.delta.as_ref().map(|d| d.tombstones)),
            opt_big(h.delta.as_ref().map(|d| d.expired_tombstones)),
            opt_big(h.delta.as_ref().and_then(|d| d.vacuumable_files)),
            opt_big(h.delta.as_ref().and_then(|d| d.vacuumable_bytes)),
            opt_text(h.blocked.compaction),
            opt_text(h.blocked.cleanup),
        ]])
    }
}
