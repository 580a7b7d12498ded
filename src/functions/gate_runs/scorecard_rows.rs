//! The scorecard as rows: what `lakehouse_gate` returns, `lakehouse_serve`'s `GET /v1/runs/{id}`
//! shows and the run history records ([`super::history`] adds `error`): one row per partition,
//! the table-level figures on every row.

use duckdb::core::LogicalTypeId;

use crate::functions::row_function::Cell;
use crate::profile::{MIB, histogram_legend, round_mb, round_ratio, round_to};
use crate::report::Scorecard;

/// The scorecard's columns (the history's are these and `error`: [`super::history::columns`]).
pub const COLUMNS: [(&str, LogicalTypeId); 49] = {
    use LogicalTypeId::*;
    [
        ("execution_id", Varchar),
        ("table_name", Varchar),
        ("status", Varchar),
        ("partition", Varchar),
        ("spec_id", Integer),
        ("verdict", Varchar),
        ("reason", Varchar),
        ("action", Varchar),
        ("files_before", Bigint),
        ("files_after", Bigint),
        ("small_files_before", Bigint),
        ("small_files_after", Bigint),
        ("fragmentation_ratio_before", Double),
        ("fragmentation_ratio_after", Double),
        ("mb_consolidated", Double),
        ("partitions_total", Bigint),
        ("partitions_degraded", Bigint),
        ("partitions_compacted", Bigint),
        ("small_files_eliminated", Bigint),
        ("volume_consolidated_mb", Double),
        ("scan_before_ms", Double),
        ("scan_after_ms", Double),
        ("measured_speedup", Double),
        ("projected_speedup_low", Double),
        ("projected_speedup_high", Double),
        ("compaction_snapshot_id", Bigint),
        ("snapshots_expired", Bigint),
        ("files_deleted", Bigint),
        ("bytes_reclaimed", Bigint),
        ("snapshot_retention_days", Double),
        ("notification", Varchar),
        ("dry_run", Boolean),
        ("started_at", Timestamp),
        ("duration_ms", Bigint),
        ("avg_fragmentation_ratio_after", Double),
        ("manifests_merged", Bigint),
        ("manifest_snapshot_id", Bigint),
        ("scan_sample_share", Double),
        ("executor", Varchar),
        ("executor_reason", Varchar),
        ("strategy", Varchar),
        ("warnings", Varchar),
        ("rows_purged", Bigint),
        ("delete_files_rewritten", Bigint),
        ("delete_rewrite_snapshot_id", Bigint),
        ("commit", Varchar),
        ("file_sizes_before", Varchar),
        ("file_sizes_after", Varchar),
        ("file_size_buckets", Varchar),
    ]
};

fn big(n: u64) -> Cell {
    Cell::BigInt(n as i64)
}

/// The scorecard as rows: one per partition (one with a NULL partition for a table without data).
pub fn rows(card: &Scorecard) -> Vec<Vec<Cell>> {
    let ms = |s: &Option<crate::report::ScanResult>| {
        s.as_ref().map_or(Cell::Null, |s| Cell::Double(round_to(s.elapsed.as_secs_f64() * 1000.0, 2)))
    };
    let table_level = |row: &mut Vec<Cell>| {
        row.extend([
            big(card.partitions.len() as u64),
            big(card.partitions_degraded),
            big(card.partitions_compacted),
            big(card.small_files_eliminated),
            Cell::Double(round_mb(card.bytes_consolidated as f64 / MIB)),
            ms(&card.scan_before),
            ms(&card.scan_after),
            card.measured_speedup().map_or(Cell::Null, |x| Cell::Double(round_to(x, 2))),
            Cell::Double(round_to(card.projected_speedup_low, 2)),
            Cell::Double(round_to(card.projected_speedup_high, 2)),
            card.compaction_snapshot_id.map_or(Cell::Null, Cell::BigInt),
            big(card.snapshots_expired),
            big(card.files_deleted),
            big(card.bytes_reclaimed),
            Cell::Double(card.retention_days),
            Cell::Text(card.notification.clone()),
            Cell::Bool(card.dry_run),
            Cell::Timestamp(card.started_ms.saturating_mul(1000)),
            big(card.duration_ms),
            Cell::Double(round_ratio(card.avg_ratio_after)),
            big(card.manifests_merged),
            card.manifest_snapshot_id.map_or(Cell::Null, Cell::BigInt),
            Cell::Double(round_ratio(card.scan_share)),
        ]);
    };
    let warnings = || if card.warnings.is_empty() { Cell::Null } else { Cell::Text(card.warnings.join("; ")) };
    let deletes =
        || [big(card.delete_files_rewritten), card.delete_rewrite_snapshot_id.map_or(Cell::Null, Cell::BigInt)];
    let head = || {
        vec![
            Cell::Text(card.execution_id.clone()),
            Cell::Text(card.table.clone()),
            Cell::Text(card.status.as_str().into()),
        ]
    };
    if card.partitions.is_empty() {
        let mut row = head();
        row.extend((0..12).map(|_| Cell::Null));
        table_level(&mut row);
        row.extend([Cell::Null, Cell::Null, Cell::Null, warnings(), Cell::Null]);
        row.extend(deletes());
        row.extend([Cell::Null, Cell::Null, Cell::Null, Cell::Null]);
        return vec![row];
    }
    card.partitions
        .iter()
        .map(|p| {
            let mut row = head();
            row.extend([
                Cell::Text(p.partition.clone()),
                Cell::Int(p.spec_id),
                Cell::Text(p.verdict.as_str().into()),
                Cell::Text(p.reason.clone()),
                Cell::Text(p.action.clone()),
                big(p.files_before),
                big(p.files_after),
                big(p.small_files_before),
                big(p.small_files_after),
                Cell::Double(round_ratio(p.ratio_before)),
                Cell::Double(round_ratio(p.ratio_after)),
                Cell::Double(round_mb(p.bytes_consolidated as f64 / MIB)),
            ]);
            table_level(&mut row);
            row.extend([
                p.executor.clone().map_or(Cell::Null, Cell::Text),
                p.executor_reason.clone().map_or(Cell::Null, Cell::Text),
                p.strategy.clone().map_or(Cell::Null, Cell::Text),
                warnings(),
                big(p.rows_purged),
            ]);
            row.extend(deletes());
            row.push(p.commit.clone().map_or(Cell::Null, Cell::Text));
            row.extend([
                Cell::Text(p.sizes_before.clone()),
                Cell::Text(p.sizes_after.clone()),
                Cell::Text(histogram_legend(card.small_file_threshold_mb)),
            ]);
            row
        })
        .collect()
}
