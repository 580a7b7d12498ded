//! The projected scan speedup of a compaction (pure), as a range calibrated on DuckDB's scans.
//!
//! A full scan of a set of Parquet files through DuckDB costs an amount per query, an amount per
//! file (opening it, reading its footer, scheduling its row groups) and an amount per MiB read.
//! Measured with DuckDB 1.5 on local disk (2 threads; `bench/speedup_model.py` reproduces it):
//! 2,000,000 rows as 1, 8, 64, 512 and 2,048 files scan in 43, 52, 48, 115 and 269 ms, and the
//! gate's own scans of the demo table (48 files of 3 KiB before, one after) take 7.8 and 2.1 ms.
//! The fit is about 2 ms per query (a one-file scan of 0.2 to 0.4 MiB takes 1.9 to 2.1 ms),
//! 0.11 to 0.12 ms per file and 1.2 ms per MiB on an idle machine (up to 2.8 ms when other builds
//! share the cores: decoding is what slows): a file costs what reading [`FILE_COST_MIB`] does, a
//! query what reading [`QUERY_COST_MIB`] does. Compaction keeps the bytes and removes files, so:
//!
//! - `low`: that model, `(Q + F·files_before + MiB) / (Q + F·files_after + MiB)` — what a scan of
//!   the compacted partitions on local disk gains (the gate's `measured_speedup` measures the
//!   same on a sample of them);
//! - `high`: `files_before / files_after` — what it gains when opening a file is all a scan costs
//!   (object storage, where each file is requests paid in latency): the reference flow's figure,
//!   counted on the files the plan leaves.

use crate::profile::{MIB, PartitionProfile};

/// What opening one Parquet file costs a DuckDB scan, in MiB read (0.11 ms / 1.2 ms per MiB).
pub const FILE_COST_MIB: f64 = 0.09;
/// What one scan query costs beside its files, in MiB read (2 ms / 1.2 ms per MiB).
pub const QUERY_COST_MIB: f64 = 1.7;

/// A projected speedup: between `low` (local disk) and `high` (per-file cost only).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpeedupRange {
    /// The calibrated local-disk model.
    pub low: f64,
    /// Files before / files after.
    pub high: f64,
}

impl SpeedupRange {
    /// No compaction: no speedup.
    pub const NONE: SpeedupRange = SpeedupRange { low: 1.0, high: 1.0 };
}

/// The speedup of scanning `bytes` held in `files_before` files once they are `files_after`.
pub fn speedup(files_before: u64, files_after: u64, bytes: u64) -> SpeedupRange {
    if files_before == 0 || files_after >= files_before {
        return SpeedupRange::NONE;
    }
    let mib = bytes as f64 / MIB;
    let cost = |files: u64| QUERY_COST_MIB + FILE_COST_MIB * files as f64 + mib;
    SpeedupRange { low: cost(files_before) / cost(files_after), high: files_before as f64 / files_after.max(1) as f64 }
}

/// The files a degraded partition is left with, planned as the compaction plans on input bytes
/// ([`crate::plan::compaction::group_count`]; the gate measures the rewrite's output size first,
/// so its plan may count fewer): its large files, and its small ones bin-packed toward the target.
pub fn files_after(p: &PartitionProfile, target_file_size_mb: f64) -> u64 {
    if !p.requires_compaction {
        return p.total_files;
    }
    let target = (target_file_size_mb * MIB) as u64;
    let groups = (crate::plan::compaction::group_count(p.small_size_bytes, target) as u64).clamp(1, p.small_files / 2);
    p.total_files - p.small_files + groups
}

/// The projected speedup of compacting the degraded partitions of a profile toward
/// `target_file_size_mb` (what `lakehouse_fragmentation_summary` shows).
pub fn of_profile(partitions: &[PartitionProfile], target_file_size_mb: f64) -> SpeedupRange {
    let degraded = partitions.iter().filter(|p| p.requires_compaction);
    let (before, after, bytes) = degraded.fold((0, 0, 0), |(b, a, s), p| {
        (b + p.total_files, a + files_after(p, target_file_size_mb), s + p.total_size_bytes)
    });
    speedup(before, after, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_range_is_the_file_ratio_above_and_the_calibrated_model_below() {
        // The demo: 122 files (1.07 MiB) in the two degraded partitions become 11.
        let demo = speedup(122, 11, (1.07 * MIB) as u64);
        assert!((demo.high - 122.0 / 11.0).abs() < 1e-9);
        assert!((3.0..4.5).contains(&demo.low), "{demo:?}: the gate measures 3.5 to 4.1x on the demo");
        // 1,000 files of 1 MiB into 8 of 125 MiB: on local disk bytes dominate.
        let big = speedup(1000, 8, 1000 * MIB as u64);
        assert!((big.high - 125.0).abs() < 1e-9 && big.low < 1.1, "{big:?}");
        assert_eq!(speedup(0, 0, 0), SpeedupRange::NONE);
        assert_eq!(speedup(3, 3, 100), SpeedupRange::NONE);
    }
}
