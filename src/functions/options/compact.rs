//! `lakehouse_compact`'s options (the table function's named parameters and the scalar's JSON
//! keys), also the gate's compaction and executor options.

use crate::action::executor::{DEFAULT_LOCAL_MAX_PARTITION_MB, ExecutorKind, ExecutorOptions, SparkTarget};
use crate::error::{Error, Result};
use crate::functions::args::{TABLE_PARAMETERS, THRESHOLD_PARAMETERS};
use crate::plan::compaction::{CompactionOptions, DEFAULT_MAX_COMMITS};
use crate::plan::format_options::FormatOnly;
use crate::plan::layout::{LayoutOptions, recent_window};
use crate::spark::Remote;
use crate::table::LocateOptions;

use super::source::OptionSource;

/// The compaction's named parameters besides the thresholds, `dry_run` and the table ones.
pub const COMPACTION_PARAMETERS: [&str; 12] = [
    "target_file_size_mb",
    "min_input_files",
    "partitions",
    "apply_deletes",
    "strategy",
    "sort_order",
    "skip_recent_partitions",
    "delete_ratio_threshold",
    "delete_file_threshold",
    "stitch",
    "partial_progress",
    "max_commits",
];

/// Who rewrites ([`crate::action::executor`]); the table function's only (the scalar always
/// rewrites here).
pub const EXECUTOR_PARAMETERS: [&str; 4] = ["executor", "spark_remote", "spark_catalog", "local_max_partition_mb"];

/// `lakehouse_compact`'s parameters: the thresholds, [`COMPACTION_PARAMETERS`], with `executor`
/// [`EXECUTOR_PARAMETERS`] (the table function), `dry_run`, the table's. Without the executor's,
/// the scalar's JSON keys.
pub fn compact_parameters(executor: bool) -> Vec<&'static str> {
    let mut names = THRESHOLD_PARAMETERS.to_vec();
    names.extend(COMPACTION_PARAMETERS);
    if executor {
        names.extend(EXECUTOR_PARAMETERS);
    }
    names.push("dry_run");
    names.extend(TABLE_PARAMETERS);
    names
}

/// `lakehouse_compact`'s options, both forms.
pub struct CompactOptions {
    /// How the table is resolved.
    pub locate: LocateOptions,
    /// The compaction's options.
    pub compaction: CompactionOptions,
    /// Plan only.
    pub dry_run: bool,
    /// Options of one format only: the table function refuses them on a table of the other, the
    /// scalar ignores them with a warning (one template serves many tables).
    pub format_only: FormatOnly,
}

/// Reads [`CompactOptions`] (the executor's options are [`executor_options`]).
pub fn compact_options(source: &impl OptionSource) -> Result<CompactOptions> {
    Ok(CompactOptions {
        compaction: compaction_options(source, false)?,
        locate: source.locate_options()?,
        dry_run: source.bool("dry_run", false)?,
        format_only: FormatOnly::given(|name| source.given(name)),
    })
}

/// Reads [`EXECUTOR_PARAMETERS`], validated. `spark_remote` defaults to `SPARK_REMOTE` (as in
/// Spark's own clients); it may hold credentials, so it is never shown.
pub fn executor_options(source: &impl OptionSource) -> Result<ExecutorOptions> {
    let kind = match source.opt_string("executor", false)? {
        Some(text) => ExecutorKind::parse(&text)?,
        None => ExecutorKind::Local,
    };
    let local_max_partition_mb = source.f64("local_max_partition_mb", DEFAULT_LOCAL_MAX_PARTITION_MB)?;
    if !(local_max_partition_mb.is_finite() && local_max_partition_mb > 0.0) {
        return Err(Error::invalid(format!(
            "local_max_partition_mb must be a positive number of MiB, got {local_max_partition_mb}"
        )));
    }
    let remote = source
        .opt_string("spark_remote", true)?
        .or_else(|| std::env::var("SPARK_REMOTE").ok().filter(|v| !v.trim().is_empty()));
    let catalog = source.opt_string("spark_catalog", false)?;
    if catalog.as_deref().is_some_and(|c| c.trim().is_empty()) {
        return Err(Error::invalid("spark_catalog must not be empty"));
    }
    let spark = match (kind, remote) {
        (ExecutorKind::Local, _) => None,
        (_, None) => {
            return Err(Error::invalid(
                "executor := 'spark' or 'auto' needs spark_remote (or the SPARK_REMOTE variable), e.g. 'sc://localhost:15002'",
            ));
        }
        (_, Some(remote)) => Some(SparkTarget { remote: Remote::parse(&remote)?, catalog }),
    };
    Ok(ExecutorOptions { kind, spark, local_max_partition_mb })
}

/// The largest `max_commits` (documented bound of the table function's; the scalar's JSON
/// allowed up to 2^32 - 1 before the two forms shared this parser).
pub const MAX_MAX_COMMITS: i64 = 1_000_000;

/// Reads the thresholds and [`COMPACTION_PARAMETERS`], validated; `partial_progress` defaults
/// to `partial_by_default` (on for the gate, off for `lakehouse_compact`).
pub fn compaction_options(source: &impl OptionSource, partial_by_default: bool) -> Result<CompactionOptions> {
    let options = CompactionOptions {
        thresholds: source.thresholds()?,
        target_file_size_mb: source.f64("target_file_size_mb", 128.0)?,
        min_input_files: source.i64_in("min_input_files", 2, 2, i64::from(u32::MAX))? as u64,
        partitions: source.opt_string_list("partitions")?,
        apply_deletes: source.bool("apply_deletes", true)?,
        excluded: Vec::new(),
        layout: LayoutOptions::new(
            source.opt_string("strategy", false)?.as_deref(),
            source.opt_string("sort_order", false)?.as_deref(),
        )?,
        recent_window: recent_window(source.opt_string("skip_recent_partitions", false)?.as_deref())?,
        recent: Vec::new(),
        delete_ratio_threshold: source.opt_f64("delete_ratio_threshold")?,
        delete_file_threshold: source.opt_i64_in("delete_file_threshold", 1, i64::from(u32::MAX))?.map(|n| n as u64),
        stitch: source.bool("stitch", true)?,
        partial_progress: source.bool("partial_progress", partial_by_default)?,
        max_commits: source.i64_in("max_commits", DEFAULT_MAX_COMMITS as i64, 1, MAX_MAX_COMMITS)? as u64,
        only: None,
    };
    options.validate()?;
    Ok(options)
}
