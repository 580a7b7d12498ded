//! Fragmentation figures per partition, and the table-level summary, from live files (pure).
//!
//! A file is *small* when its size is below `small_file_threshold_mb` MiB; a partition's
//! fragmentation ratio is small data files / data files (the reference flow's definitions). It
//! requires compaction when compaction can improve it, as the planner decides
//! ([`Thresholds::assess`]): the ratio reaches `fragmentation_ratio_threshold` *and* it holds at
//! least `min_input_files` small files — one small file per partition, all a compaction leaves
//! of a small table, is nothing to merge.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::store::location_key;
use crate::table::summary::{
    ManifestTally, PartitionTally, SIZE_BUCKET_EDGES, SIZE_BUCKETS, SMALL_BUCKETS, referenced_paths,
};
use crate::table::{DataFile, PartitionKey, Table};

/// Bytes in one MiB: the unit of every `_mb` figure.
pub const MIB: f64 = 1024.0 * 1024.0;

/// The thresholds of the verdict, validated.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Thresholds {
    /// Files smaller than this many MiB are small.
    pub small_file_threshold_mb: f64,
    /// A partition whose small-file ratio reaches this needs compaction (with enough small files).
    pub fragmentation_ratio_threshold: f64,
    /// A partition with fewer small files than this has nothing to merge (compaction's
    /// `min_input_files`, default [`DEFAULT_MIN_INPUT_FILES`]).
    pub min_input_files: u64,
}

/// `min_input_files`' default: two small files are the fewest a rewrite can merge.
pub const DEFAULT_MIN_INPUT_FILES: u64 = 2;

impl Default for Thresholds {
    fn default() -> Self {
        Self {
            small_file_threshold_mb: 64.0,
            fragmentation_ratio_threshold: 0.35,
            min_input_files: DEFAULT_MIN_INPUT_FILES,
        }
    }
}

/// Whether a partition needs compaction, and why ([`Thresholds::assess`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Assessment {
    /// The small-file ratio is below the threshold.
    Healthy,
    /// The ratio reaches the threshold, but fewer than `min_input_files` files are small.
    NothingToMerge,
    /// Degraded: compaction merges its small files.
    Degraded,
}

impl Thresholds {
    /// Checks ranges: a positive finite size, and a ratio in [0, 1].
    pub fn new(small_file_threshold_mb: f64, fragmentation_ratio_threshold: f64) -> Result<Self> {
        if !small_file_threshold_mb.is_finite() || small_file_threshold_mb <= 0.0 {
            return Err(Error::invalid(format!(
                "small_file_threshold_mb must be a positive number of MiB, got {small_file_threshold_mb}"
            )));
        }
        if !(0.0..=1.0).contains(&fragmentation_ratio_threshold) {
            return Err(Error::invalid(format!(
                "fragmentation_ratio_threshold must be between 0 and 1, got {fragmentation_ratio_threshold}"
            )));
        }
        Ok(Self { small_file_threshold_mb, fragmentation_ratio_threshold, min_input_files: DEFAULT_MIN_INPUT_FILES })
    }

    /// These thresholds with another `min_input_files` (at least 2).
    pub fn with_min_input_files(self, min_input_files: u64) -> Result<Self> {
        check_min_input_files(min_input_files)?;
        Ok(Self { min_input_files, ..self })
    }

    /// The verdict on a partition of `files` data files, `small_files` of them small.
    pub fn assess(&self, files: u64, small_files: u64) -> Assessment {
        if small_file_ratio(files, small_files) < self.fragmentation_ratio_threshold || small_files == 0 {
            Assessment::Healthy
        } else if small_files < self.min_input_files {
            Assessment::NothingToMerge
        } else {
            Assessment::Degraded
        }
    }

    /// The verdict in words: `healthy: ratio 0.20 < 0.35`, `healthy: nothing to merge, 1 small
    /// file < min_input_files 2`, `degraded: ratio 0.92 >= 0.35, 48 small files`.
    pub fn reason(&self, files: u64, small_files: u64) -> String {
        let ratio = small_file_ratio(files, small_files);
        let threshold = self.fragmentation_ratio_threshold;
        let plural = |n: u64| if n == 1 { "file" } else { "files" };
        match self.assess(files, small_files) {
            Assessment::Healthy if small_files == 0 => "healthy: no small files".into(),
            Assessment::Healthy => format!("healthy: ratio {ratio:.2} < {threshold}"),
            Assessment::NothingToMerge => format!(
                "healthy: nothing to merge, {small_files} small {} < min_input_files {}",
                plural(small_files),
                self.min_input_files
            ),
            Assessment::Degraded => {
                format!("degraded: ratio {ratio:.2} >= {threshold}, {small_files} small {}", plural(small_files))
            }
        }
    }

    /// The small-file threshold in bytes.
    pub fn small_file_threshold_bytes(&self) -> f64 {
        self.small_file_threshold_mb * MIB
    }
}

/// small_files / files, 0 for no files.
fn small_file_ratio(files: u64, small_files: u64) -> f64 {
    if files == 0 { 0.0 } else { small_files as f64 / files as f64 }
}

/// Checks `min_input_files`: at least 2 (a rewrite of one file into itself merges nothing).
pub fn check_min_input_files(min_input_files: u64) -> Result<u64> {
    if min_input_files < 2 {
        return Err(Error::invalid(format!("min_input_files must be at least 2, got {min_input_files}")));
    }
    Ok(min_input_files)
}

/// Checks a compaction target size: a positive, finite number of MiB.
pub fn check_target_file_size_mb(target_file_size_mb: f64) -> Result<f64> {
    if !target_file_size_mb.is_finite() || target_file_size_mb <= 0.0 {
        return Err(Error::invalid(format!(
            "target_file_size_mb must be a positive number of MiB, got {target_file_size_mb}"
        )));
    }
    Ok(target_file_size_mb)
}

/// Fragmentation figures of one partition (of one partition spec).
#[derive(Debug, Clone, PartialEq)]
pub struct PartitionProfile {
    /// Readable partition label.
    pub partition: String,
    /// Partition spec id of the files.
    pub spec_id: i32,
    /// Spec and value tuple (what the row stands for; the label may be shared).
    pub key: PartitionKey,
    /// Live data files.
    pub total_files: u64,
    /// Live data files below the threshold.
    pub small_files: u64,
    /// Bytes of all live data files.
    pub total_size_bytes: u64,
    /// Bytes of the small data files.
    pub small_size_bytes: u64,
    /// Rows in the live data files (before deletes).
    pub record_count: u64,
    /// Live position and equality delete files of this partition (its spec and tuple) or that
    /// can delete rows of its data files (global ones: an unpartitioned spec's, of a later
    /// sequence number) — every delete file a reader of the partition opens.
    pub delete_files: u64,
    /// Of those, the ones that can delete rows of this partition's data files (what a rewrite
    /// must apply; the planner's figure).
    pub applicable_delete_files: u64,
    /// The partition's own live delete files that can delete no row of any live data file
    /// (the data files they applied to were rewritten or removed, or are all newer): readers
    /// still open them; compaction of the partition removes them.
    pub dangling_delete_files: u64,
    /// small_files / total_files.
    pub fragmentation_ratio: f64,
    /// Compaction can improve it: fragmentation_ratio ≥ threshold and at least
    /// `min_input_files` small files ([`Thresholds::assess`]).
    pub requires_compaction: bool,
    /// The verdict in words ([`Thresholds::reason`]).
    pub reason: String,
    /// Data files per size bucket ([`crate::table::summary::size_bucket`]).
    pub size_buckets: [u64; SIZE_BUCKETS],
}

impl PartitionProfile {
    /// Total size in MiB.
    pub fn total_size_mb(&self) -> f64 {
        self.total_size_bytes as f64 / MIB
    }

    /// The file-size distribution at a glance ([`histogram`]).
    pub fn size_histogram(&self) -> String {
        histogram(&self.size_buckets)
    }

    /// Average data file size in MiB.
    pub fn avg_file_size_mb(&self) -> f64 {
        if self.total_files == 0 { 0.0 } else { self.total_size_mb() / self.total_files as f64 }
    }
}

/// The profile of `table`'s current snapshot (version): Iceberg streams its manifests into
/// per-partition figures ([`crate::table::iceberg::IcebergTable::summarize_manifests`]), delete
/// manifests first (the data files their position deletes name must be known before the data
/// manifests stream by); Delta's live files are counted at once.
pub fn table_profile(table: &Table, thresholds: &Thresholds) -> Result<Vec<PartitionProfile>> {
    profile_keeping(table, thresholds, false)
}

/// [`table_profile`] for a caller that plans compaction of the same state next (the gate): an
/// Iceberg table without delete manifests keeps each manifest's tally
/// ([`crate::table::iceberg::IcebergTable::data_tallies`]), so the plan reads no manifest again
/// (a tally per manifest and partition is held meanwhile, not a running total).
pub fn table_profile_for_planning(table: &Table, thresholds: &Thresholds) -> Result<Vec<PartitionProfile>> {
    profile_keeping(table, thresholds, true)
}

fn profile_keeping(table: &Table, thresholds: &Thresholds, keep: bool) -> Result<Vec<PartitionProfile>> {
    let table = match table {
        Table::Iceberg { table, .. } => table,
        Table::Delta(table) => return Ok(profile(&table.model_files(), thresholds)),
    };
    let mut tally = Tally::new(thresholds);
    let kept = match keep {
        true => table.data_tallies(tally.small_limit)?,
        false => table.kept_tallies(tally.small_limit),
    };
    if let Some(tallies) = kept {
        return Ok(profile_tallies(tallies.iter().map(|(_, t)| t), thresholds));
    }
    let (deletes, data): (Vec<_>, Vec<_>) =
        table.current_manifests()?.into_iter().partition(|m| m.content == iceberg::spec::ManifestContentType::Deletes);
    for batch in [deletes, data] {
        let referenced = Arc::new(tally.referenced());
        let small_limit = tally.small_limit;
        table.summarize_manifests(batch, small_limit, referenced, &mut |manifest| tally.add(&manifest))?;
    }
    Ok(tally.finish())
}

/// One row per partition (spec and value tuple) that has live data files, sorted by label,
/// then spec, then tuple.
pub fn profile(files: &[DataFile], thresholds: &Thresholds) -> Vec<PartitionProfile> {
    let mut tally = Tally::new(thresholds);
    tally.add(&ManifestTally::from_files(files, tally.small_limit, &referenced_paths(files)));
    tally.finish()
}

/// The profile `tallies` add up to: one row per partition, as [`profile`]; the tallies must
/// hold every delete file that applies (a table without delete files needs none).
pub fn profile_tallies<'t>(
    tallies: impl IntoIterator<Item = &'t ManifestTally>,
    thresholds: &Thresholds,
) -> Vec<PartitionProfile> {
    let mut tally = Tally::new(thresholds);
    for t in tallies {
        tally.add(t);
    }
    tally.finish()
}

/// A partition's delete-file figures ([`PartitionProfile`]).
#[derive(Debug, Clone, Copy, Default)]
struct DeleteCounts {
    shown: u64,
    applicable: u64,
    dangling: u64,
}

/// A profile built up from [`ManifestTally`]s, manifest by manifest.
#[derive(Debug)]
struct Tally {
    /// The small-file threshold in bytes.
    small_limit: f64,
    thresholds: Thresholds,
    partitions: HashMap<(String, PartitionKey), PartitionTally>,
    deletes: Vec<DataFile>,
    named: HashMap<PathBuf, (PartitionKey, i64)>,
}

impl Tally {
    /// An empty profile with `thresholds`.
    fn new(thresholds: &Thresholds) -> Self {
        Tally {
            small_limit: thresholds.small_file_threshold_bytes(),
            thresholds: *thresholds,
            partitions: HashMap::new(),
            deletes: Vec::new(),
            named: HashMap::new(),
        }
    }

    /// Adds what a manifest contributes.
    fn add(&mut self, tally: &ManifestTally) {
        for p in &tally.partitions {
            match self.partitions.entry((p.partition.clone(), p.key.clone())) {
                Entry::Occupied(mut existing) => existing.get_mut().merge(p),
                Entry::Vacant(slot) => {
                    slot.insert(p.clone());
                }
            }
        }
        self.deletes.extend(tally.deletes.iter().cloned());
        for (path, key, seq) in &tally.named {
            self.named.insert(path.clone(), (key.clone(), *seq));
        }
    }

    /// The location keys of the data files the delete files added so far name.
    fn referenced(&self) -> HashSet<PathBuf> {
        referenced_paths(&self.deletes)
    }

    /// Per partition: its delete files and those applying to it, the applying ones, its
    /// dangling ones ([`PartitionProfile`]).
    fn delete_counts(&self) -> HashMap<PartitionKey, DeleteCounts> {
        let mut oldest: HashMap<&PartitionKey, i64> = HashMap::new();
        for p in self.partitions.values() {
            let slot = oldest.entry(&p.key).or_insert(i64::MAX);
            *slot = (*slot).min(p.oldest_sequence_number);
        }
        let mut counts: HashMap<PartitionKey, DeleteCounts> = HashMap::new();
        for delete in &self.deletes {
            // The partitions whose data files it can delete rows of.
            let applies: Vec<&PartitionKey> = if let Some(target) = &delete.referenced_data_file {
                self.named
                    .get(&location_key(target))
                    .filter(|(key, seq)| delete.applies_to_partition(key, *seq))
                    .map(|(key, _)| key)
                    .into_iter()
                    .collect()
            } else if delete.global {
                oldest
                    .iter()
                    .filter(|(key, seq)| delete.applies_to_partition(key, **seq))
                    .map(|(key, _)| *key)
                    .collect()
            } else {
                oldest
                    .get(&delete.key)
                    .filter(|seq| delete.applies_to_partition(&delete.key, **seq))
                    .map(|_| &delete.key)
                    .into_iter()
                    .collect()
            };
            for key in &applies {
                let c = counts.entry((*key).clone()).or_default();
                c.applicable += 1;
                c.shown += 1;
            }
            if !applies.contains(&&delete.key) {
                let own = counts.entry(delete.key.clone()).or_default();
                own.shown += 1;
                if applies.is_empty() {
                    own.dangling += 1;
                }
            }
        }
        counts
    }

    /// The profile: one row per partition with live data files, sorted by label, then spec,
    /// then tuple.
    fn finish(self) -> Vec<PartitionProfile> {
        let deletes = self.delete_counts();
        let mut rows: Vec<PartitionProfile> = self
            .partitions
            .into_values()
            .map(|p| {
                let fragmentation_ratio = small_file_ratio(p.files, p.small_files);
                let d = deletes.get(&p.key).copied().unwrap_or_default();
                PartitionProfile {
                    spec_id: p.key.spec_id,
                    delete_files: d.shown,
                    applicable_delete_files: d.applicable,
                    dangling_delete_files: d.dangling,
                    partition: p.partition,
                    key: p.key,
                    total_files: p.files,
                    small_files: p.small_files,
                    total_size_bytes: p.bytes,
                    small_size_bytes: p.small_bytes,
                    record_count: p.records,
                    fragmentation_ratio,
                    requires_compaction: self.thresholds.assess(p.files, p.small_files) == Assessment::Degraded,
                    reason: self.thresholds.reason(p.files, p.small_files),
                    size_buckets: p.size_buckets,
                }
            })
            .collect();
        rows.sort_by(|a, b| (a.partition.as_str(), &a.key).cmp(&(b.partition.as_str(), &b.key)));
        rows
    }
}

/// A file-size distribution ([`PartitionProfile::size_buckets`]) as one block character per
/// bucket, the tallest the most files (a space: none; `▁`: some, however few), the small buckets
/// left of `│` and the others right of it: `█▃ ▁│▁  ` is a partition of mostly tiny files.
pub fn histogram(buckets: &[u64; SIZE_BUCKETS]) -> String {
    const BLOCKS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let most = buckets.iter().copied().max().unwrap_or(0).max(1);
    let mut out = String::new();
    for (i, &count) in buckets.iter().enumerate() {
        if i == SMALL_BUCKETS {
            out.push('│');
        }
        out.push(match count {
            0 => ' ',
            n => BLOCKS[((n * 8).div_ceil(most) as usize).clamp(1, 8) - 1],
        });
    }
    out
}

/// What each of [`histogram_counts`]' buckets holds, laid out alike, for a small-file threshold
/// of `threshold_mb` MiB: `<1,<4,<16,<64|<128,<256,>=256 MiB` at 64 MiB.
pub fn histogram_legend(threshold_mb: f64) -> String {
    let bounds: Vec<String> = SIZE_BUCKET_EDGES.iter().map(|share| short_mb(threshold_mb * share)).collect();
    let below = |range: &[String]| range.iter().map(|b| format!("<{b}")).collect::<Vec<_>>().join(",");
    format!(
        "{}|{},>={} MiB",
        below(&bounds[..SMALL_BUCKETS]),
        below(&bounds[SMALL_BUCKETS..]),
        bounds[SIZE_BUCKETS - 2]
    )
}

/// `mb` to three significant digits, trailing zeros dropped: `64`, `0.016`, `0.0156`.
fn short_mb(mb: f64) -> String {
    let decimals = (2 - mb.log10().floor() as i32).clamp(0, 12) as usize;
    let text = format!("{mb:.decimals$}");
    if text.contains('.') { text.trim_end_matches('0').trim_end_matches('.').to_string() } else { text }
}

/// `a,b,c,d|e,f,g`: the counts behind [`histogram`].
pub fn histogram_counts(buckets: &[u64; SIZE_BUCKETS]) -> String {
    let text = |range: &[u64]| range.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
    format!("{}|{}", text(&buckets[..SMALL_BUCKETS]), text(&buckets[SMALL_BUCKETS..]))
}

/// The reference flow's single summary row.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// Partitions with live data files.
    pub total_partitions: u64,
    /// Live data files.
    pub total_lakehouse_files: u64,
    /// Small live data files.
    pub total_small_files: u64,
    /// Partitions that require compaction (compaction can improve them: [`Thresholds::assess`]).
    pub fragmented_partition_count: u64,
    /// Mean of the partitions' ratios (0 for an empty table).
    pub avg_fragmentation_ratio: f64,
    /// Bytes in partitions that require compaction.
    pub compactable_bytes: u64,
}

impl Summary {
    /// `compactable_bytes` in MiB.
    pub fn compactable_mb(&self) -> f64 {
        self.compactable_bytes as f64 / MIB
    }
}

/// Summarizes partition profiles (the projected speedup is [`crate::plan::projection`]'s).
pub fn summarize(partitions: &[PartitionProfile]) -> Summary {
    let degraded: Vec<&PartitionProfile> = partitions.iter().filter(|p| p.requires_compaction).collect();
    let compactable_bytes: u64 = degraded.iter().map(|p| p.total_size_bytes).sum();
    let avg = if partitions.is_empty() {
        0.0
    } else {
        partitions.iter().map(|p| p.fragmentation_ratio).sum::<f64>() / partitions.len() as f64
    };
    Summary {
        total_partitions: partitions.len() as u64,
        total_lakehouse_files: partitions.iter().map(|p| p.total_files).sum(),
        total_small_files: partitions.iter().map(|p| p.small_files).sum(),
        fragmented_partition_count: degraded.len() as u64,
        avg_fragmentation_ratio: avg,
        compactable_bytes,
    }
}

/// A MiB figure as the table functions show it: to 2 decimals (exact bytes sit beside it).
pub fn round_mb(mb: f64) -> f64 {
    round_to(mb, 2)
}

/// A ratio as the table functions show it: to 4 decimals.
pub fn round_ratio(ratio: f64) -> f64 {
    round_to(ratio, 4)
}

/// Rounds half away from zero to `digits` decimals, as SQL's ROUND does.
pub fn round_to(value: f64, digits: i32) -> f64 {
    let factor = 10f64.powi(digits);
    (value * factor).round() / factor
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::FileContent;

    #[test]
    fn the_size_histogram_buckets_files_around_the_threshold_and_draws_them() {
        let t = Thresholds::new(64.0, 0.35).unwrap();
        // 0.5 MiB, 0.9, 3 (< 4), 10 (< 16), 63 (small), 64 (not), 200, 300 (≥ 256).
        let sizes = [0.5, 0.9, 3.0, 10.0, 63.0, 64.0, 200.0, 300.0];
        let files: Vec<DataFile> = sizes.iter().map(|&mb| file("p=1", mb, FileContent::Data)).collect();
        let p = &profile(&files, &t)[0];
        assert_eq!(p.size_buckets, [2, 1, 1, 1, 1, 1, 1]);
        assert_eq!(p.size_buckets.iter().take(SMALL_BUCKETS).sum::<u64>(), p.small_files);
        assert_eq!(histogram_counts(&p.size_buckets), "2,1,1,1|1,1,1");
        assert_eq!(p.size_histogram(), "█▄▄▄│▄▄▄");
        // Mostly tiny files, one target-sized: the shape says it; an empty bucket is blank.
        assert_eq!(histogram(&[48, 12, 0, 1, 2, 0, 0]), "█▂ ▁│▁  ");
        assert_eq!(histogram(&[0; SIZE_BUCKETS]), "    │   ");
    }

    fn file(partition: &str, size_mb: f64, content: FileContent) -> DataFile {
        DataFile { record_count: 10, ..DataFile::for_tests(partition, (size_mb * MIB) as u64, content) }
    }

    /// The reference flow's demo telemetry: 52/48, 70/65, 20/4, 25/2 files (total/small).
    fn reference_files() -> Vec<DataFile> {
        let mut files = Vec::new();
        for (partition, total, small) in [("d=1", 52, 48), ("d=2", 70, 65), ("d=3", 20, 4), ("d=4", 25, 2)] {
            for i in 0..total {
                let size = if i < small { 2.5 } else { 100.0 };
                files.push(file(partition, size, FileContent::Data));
            }
        }
        files
    }

    #[test]
    fn reference_telemetry_verdicts() {
        let parts = profile(&reference_files(), &Thresholds::default());
        let got: Vec<(&str, u64, u64, bool)> =
            parts.iter().map(|p| (p.partition.as_str(), p.total_files, p.small_files, p.requires_compaction)).collect();
        assert_eq!(
            got,
            vec![("d=1", 52, 48, true), ("d=2", 70, 65, true), ("d=3", 20, 4, false), ("d=4", 25, 2, false)]
        );
        assert!((parts[0].fragmentation_ratio - 48.0 / 52.0).abs() < 1e-12);
        let summary = summarize(&parts);
        assert_eq!(summary.total_partitions, 4);
        assert_eq!(summary.total_lakehouse_files, 167);
        assert_eq!(summary.total_small_files, 119);
        assert_eq!(summary.fragmented_partition_count, 2);
        // degraded MiB = 48*2.5+4*100 + 65*2.5+5*100 = 1182.5 → ceil(1182.5/128) = 10 files
        assert!((summary.compactable_mb() - 1182.5).abs() < 1e-3, "{}", summary.compactable_mb());
    }

    #[test]
    fn boundaries_and_delete_files() {
        let files = vec![
            file("p", 64.0, FileContent::Data),           // exactly the threshold: not small
            file("p", 63.99, FileContent::Data),          // small
            file("p", 1.0, FileContent::PositionDeletes), // counted apart
        ];
        let parts = profile(&files, &Thresholds::new(64.0, 0.5).unwrap());
        assert_eq!(parts.len(), 1);
        assert_eq!((parts[0].total_files, parts[0].small_files, parts[0].delete_files), (2, 1, 1));
        assert!(
            !parts[0].requires_compaction,
            "ratio 0.5 reaches threshold 0.5, but one small file merges with nothing"
        );
        assert_eq!(parts[0].reason, "healthy: nothing to merge, 1 small file < min_input_files 2");
        let mut more = files.clone();
        more.push(file("p", 1.0, FileContent::Data));
        let parts = profile(&more, &Thresholds::new(64.0, 0.5).unwrap());
        assert!(parts[0].requires_compaction, "two small files of three");
        assert_eq!(parts[0].reason, "degraded: ratio 0.67 >= 0.5, 2 small files");
        let three = Thresholds::new(64.0, 0.5).unwrap().with_min_input_files(3).unwrap();
        assert!(!profile(&more, &three)[0].requires_compaction, "min_input_files 3");
        assert!(Thresholds::default().with_min_input_files(1).is_err());
    }

    #[test]
    fn one_small_file_per_partition_is_nothing_to_merge_and_the_summary_agrees() {
        // What a compaction leaves of a small table: each partition one file, under the threshold.
        let files: Vec<DataFile> = ["d=1", "d=2", "d=3"].iter().map(|p| file(p, 3.0, FileContent::Data)).collect();
        let parts = profile(&files, &Thresholds::default());
        for p in &parts {
            assert_eq!((p.fragmentation_ratio, p.requires_compaction), (1.0, false), "{p:?}");
            assert_eq!(p.reason, "healthy: nothing to merge, 1 small file < min_input_files 2");
        }
        let summary = summarize(&parts);
        assert_eq!((summary.fragmented_partition_count, summary.compactable_bytes), (0, 0));
        // A partition with no small file is healthy whatever the ratio threshold.
        let big = profile(&[file("d=1", 100.0, FileContent::Data)], &Thresholds::new(64.0, 0.0).unwrap());
        assert_eq!((big[0].requires_compaction, big[0].reason.as_str()), (false, "healthy: no small files"));
    }

    #[test]
    fn the_bucket_legend_names_each_count() {
        assert_eq!(histogram_legend(64.0), "<1,<4,<16,<64|<128,<256,>=256 MiB");
        assert_eq!(histogram_legend(0.064), "<0.001,<0.004,<0.016,<0.064|<0.128,<0.256,>=0.256 MiB");
        assert_eq!(histogram_legend(1.0), "<0.0156,<0.0625,<0.25,<1|<2,<4,>=4 MiB");
    }

    #[test]
    fn deletes_apply_by_spec_partition_sequence_and_path() {
        let data = |partition: &str, spec: i32, seq: i64| {
            let mut f = file(partition, 1.0, FileContent::Data);
            f.key.spec_id = spec;
            f.spec_id = spec;
            f.data_sequence_number = seq;
            f
        };
        let delete = |content, partition: &str, spec: i32, seq: i64, global: bool| {
            let mut f = data(partition, spec, seq);
            f.content = content;
            f.global = global;
            f
        };
        use FileContent::{EqualityDeletes as Eq, PositionDeletes as Pos};
        let files = vec![
            data("a", 1, 2),
            data("a", 1, 5),
            data("b", 1, 6),
            data("c", 1, 9),
            data("a", 2, 1), // same label, another spec
            // A global equality delete at 6 applies to files older than 6: a (both specs), not b or c.
            delete(Eq, "(unpartitioned)", 0, 6, true),
            // A position delete of spec 1 partition c at 9 applies (<=); an equality one does not (<).
            delete(Pos, "c", 1, 9, false),
            delete(Eq, "c", 1, 9, false),
            // A position delete naming a file only applies to that file.
            DataFile { referenced_data_file: Some("/t/b/elsewhere.parquet".into()), ..delete(Pos, "b", 1, 7, false) },
        ];
        let parts = profile(&files, &Thresholds::default());
        let counts: HashMap<PartitionKey, u64> = parts
            .iter()
            .filter(|p| p.applicable_delete_files > 0)
            .map(|p| (p.key.clone(), p.applicable_delete_files))
            .collect();
        let key = |p: &str, spec: i32| PartitionKey { spec_id: spec, values: data(p, spec, 0).key.values };
        assert_eq!(counts.get(&key("a", 1)), Some(&1));
        assert_eq!(counts.get(&key("a", 2)), Some(&1), "global deletes cross specs");
        assert_eq!(counts.get(&key("b", 1)), None, "newer data and a delete naming another file");
        assert_eq!(counts.get(&key("c", 1)), Some(&1));
        assert_eq!(parts.len(), 4, "one row per spec and tuple, delete files are not rows");
        let figures: Vec<(u64, u64, u64)> =
            parts.iter().map(|p| (p.delete_files, p.applicable_delete_files, p.dangling_delete_files)).collect();
        // a/1, a/2: the global delete; b/1: its own delete naming another file (dangling); c/1:
        // the position delete applies, its own equality delete (not older data) is dangling.
        assert_eq!(figures, vec![(1, 1, 0), (1, 1, 0), (1, 0, 1), (2, 1, 1)]);
        assert_eq!(parts.iter().map(|p| p.applicable_delete_files).collect::<Vec<_>>(), vec![1, 1, 0, 1]);
    }

    #[test]
    fn invalid_thresholds_are_refused() {
        for (size, ratio) in [(-1.0, 0.35), (0.0, 0.35), (f64::NAN, 0.35), (64.0, -0.1), (64.0, 1.5), (64.0, f64::NAN)]
        {
            assert!(Thresholds::new(size, ratio).is_err(), "{size} {ratio}");
        }
        assert!(Thresholds::new(0.001, 0.0).is_ok());
    }

    #[test]
    fn empty_table_summary() {
        let summary = summarize(&[]);
        assert_eq!((summary.total_partitions, summary.fragmented_partition_count), (0, 0));
        assert_eq!(round_to(0.123456, 4), 0.1235);
    }
}
