//! What a compaction is asked to do ([`CompactionOptions`]) and the checks of its sizing: the
//! options every compaction planner and committer reads, apart from the planning itself
//! ([`super::compaction`]).

use crate::error::{Error, Result};
use crate::plan::layout::LayoutOptions;
use crate::profile::{Thresholds, check_min_input_files, check_target_file_size_mb};
use crate::table::PartitionKey;

/// Delta's `optimize.maxDeletedRowsRatio`: a file with at least this share of its rows deleted
/// is rewritten (purged).
pub const DELTA_DELETE_RATIO_THRESHOLD: f64 = 0.05;

/// Iceberg's `delete-ratio-threshold` default (`rewrite_data_files`, Java 1.10).
pub const ICEBERG_DELETE_RATIO_THRESHOLD: f64 = 0.3;

/// What the user asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct CompactionOptions {
    /// Verdict thresholds (their `min_input_files` is this struct's: [`Self::verdict_thresholds`]).
    pub thresholds: Thresholds,
    /// Output file size to aim for, MiB.
    pub target_file_size_mb: f64,
    /// A partition with fewer small files than this has nothing to merge (healthy).
    pub min_input_files: u64,
    /// Only these partition labels (as the profile prints them), when given.
    pub partitions: Option<Vec<String>>,
    /// Rewrite partitions that delete files apply to, with the deletes applied (else skip them).
    pub apply_deletes: bool,
    /// Partitions another executor rewrites (Spark, [`crate::action::executor`]): left alone here.
    pub excluded: Vec<PartitionKey>,
    /// The order rows are written in ([`crate::plan::layout`]).
    pub layout: LayoutOptions,
    /// `skip_recent_partitions`: time partitions ending after now minus this many µs are held
    /// back (`None`: none are).
    pub recent_window: Option<i64>,
    /// Rewrite a data file whose own deletes delete at least this share of its rows (0: any
    /// deleted row). `None` as the user gives it: the format's default
    /// ([`DELTA_DELETE_RATIO_THRESHOLD`], [`ICEBERG_DELETE_RATIO_THRESHOLD`]), which the format's
    /// rewrite puts here before planning; to the planner, `None` means only small files are
    /// rewritten.
    pub delete_ratio_threshold: Option<f64>,
    /// Rewrite a data file that at least this many delete files apply to (`None`: never for that
    /// reason, Java's default).
    pub delete_file_threshold: Option<u64>,
    /// The partitions that window holds back, found by the format's rewrite (its time
    /// transforms); left alone with `skipped: still being written`.
    pub recent: Vec<PartitionKey>,
    /// Stitch row groups where the inputs allow it (`stitch`, on by default;
    /// [`crate::action::compact::stitch`]): copy their column chunks into the new file instead of
    /// re-encoding them.
    pub stitch: bool,
    /// Commit in up to [`CompactionOptions::max_commits`] batches of rewrite groups instead of
    /// once, and re-plan and retry a batch lost to another writer's conflicting commit
    /// (`partial_progress`; Java's `partial-progress.enabled`): on for the gate, off for
    /// `lakehouse_compact`, whose one snapshot is all or nothing
    /// ([`crate::action::compact::progress`]).
    pub partial_progress: bool,
    /// With `partial_progress`, at most this many commits (`max_commits`; Java's
    /// `partial-progress.max-commits`, default 10), of whole partitions where they fit.
    pub max_commits: u64,
    /// Only these partitions may be compacted (a re-plan after a conflict); `None`: any.
    pub only: Option<Vec<PartitionKey>>,
}

/// `max_commits`' default, Java's `partial-progress.max-commits`.
pub const DEFAULT_MAX_COMMITS: u64 = 10;

impl Default for CompactionOptions {
    fn default() -> Self {
        Self {
            thresholds: Thresholds::default(),
            target_file_size_mb: 128.0,
            min_input_files: 2,
            partitions: None,
            apply_deletes: true,
            excluded: Vec::new(),
            layout: LayoutOptions::default(),
            recent_window: Some(0),
            recent: Vec::new(),
            delete_ratio_threshold: None,
            delete_file_threshold: None,
            stitch: true,
            partial_progress: false,
            max_commits: DEFAULT_MAX_COMMITS,
            only: None,
        }
    }
}

/// Checks what compaction shares with the profile's summary: the target, against the thresholds
/// (`min_input_files` included). The one check of them, for `lakehouse_compact`, the gate and
/// `lakehouse_fragmentation_summary` alike.
pub fn check_sizing(thresholds: &Thresholds, target_file_size_mb: f64) -> Result<()> {
    check_target_file_size_mb(target_file_size_mb)?;
    if target_file_size_mb < thresholds.small_file_threshold_mb {
        return Err(Error::invalid(format!(
            "target_file_size_mb ({}) must not be below small_file_threshold_mb ({}): compacted files would still be small",
            target_file_size_mb, thresholds.small_file_threshold_mb
        )));
    }
    check_min_input_files(thresholds.min_input_files)?;
    Ok(())
}

impl CompactionOptions {
    /// The thresholds a partition is judged by: [`Self::thresholds`] with [`Self::min_input_files`].
    pub fn verdict_thresholds(&self) -> Thresholds {
        Thresholds { min_input_files: self.min_input_files, ..self.thresholds }
    }

    /// Checks the target, `min_input_files` and the other limits.
    pub fn validate(&self) -> Result<()> {
        check_sizing(&self.verdict_thresholds(), self.target_file_size_mb)?;
        if let Some(r) = self.delete_ratio_threshold
            && !(0.0..=1.0).contains(&r)
        {
            return Err(Error::invalid(format!(
                "delete_ratio_threshold must be between 0 and 1 (a share of a file's rows), got {r}"
            )));
        }
        if self.delete_file_threshold == Some(0) {
            return Err(Error::invalid("delete_file_threshold must be at least 1 (a count of delete files)"));
        }
        if self.max_commits == 0 {
            return Err(Error::invalid("max_commits must be at least 1 (a count of commits)"));
        }
        Ok(())
    }
}
