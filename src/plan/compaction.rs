//! Bin-pack compaction planning (pure).
//!
//! Per partition (of one partition spec) the verdict comes from the profile's thresholds. Only a
//! degraded partition is compacted, and only its *small* files are rewritten: they are packed,
//! largest first, into the fewest groups of about `target_file_size_mb`, balanced so groups are
//! of even size ([`bin_pack`]); each group becomes one output file, so output sizes are
//! controlled here and not by the writer. A group of
//! one file would rewrite a file into itself and is dropped. Partitions with delete files are
//! compacted with the deletes applied (`apply_deletes`, the default; the format's rewrite applies
//! them, see [`crate::action::compact`]) or, with `apply_deletes := false`, skipped, so no deleted
//! row can come back either way.
//!
//! A partition is also degraded by deleted rows: with `delete_ratio_threshold`, every data file
//! whose own deletes (a deletion vector, or a position delete file that names its data file)
//! delete at least that share of its rows is rewritten with them applied — with the small files
//! when the partition is compacted, else alone (what Delta's `REORG TABLE … APPLY (PURGE)` and
//! Iceberg's `delete-ratio-threshold` do; Spark's OPTIMIZE drops one-file bins and so never
//! purges a single large file, delta#5781). With `delete_file_threshold`, so is every data file
//! that at least that many delete files apply to (Iceberg's `delete-file-threshold`: equality
//! deletes count too, whose rows are unknown until read).

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::profile::{MIB, PartitionProfile, profile};
use crate::table::{DataFile, FileContent, PartitionKey};

pub use super::compaction_options::{
    CompactionOptions, DEFAULT_MAX_COMMITS, DELTA_DELETE_RATIO_THRESHOLD, ICEBERG_DELETE_RATIO_THRESHOLD, check_sizing,
};

/// The decision for one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Small files will be rewritten.
    Compact,
    /// Below the ratio threshold, or too few small files to merge: left alone.
    Healthy,
    /// Degraded or not, left alone for the stated reason.
    Skipped,
}

impl Verdict {
    /// Lower-case name for output rows.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Compact => "compact",
            Verdict::Healthy => "healthy",
            Verdict::Skipped => "skipped",
        }
    }
}

/// The plan for one partition.
#[derive(Debug, Clone, PartialEq)]
pub struct PartitionPlan {
    /// Partition label.
    pub partition: String,
    /// Partition spec id.
    pub spec_id: i32,
    /// Spec and value tuple: every file of every group has exactly this one.
    pub key: PartitionKey,
    /// The decision.
    pub verdict: Verdict,
    /// Why, in words (`healthy: ratio 0.20 < 0.35`).
    pub reason: String,
    /// Live data files now.
    pub files_before: u64,
    /// Small live data files now.
    pub small_files_before: u64,
    /// Groups of input files (indices into the planner's `files`), one output file each; empty
    /// unless the verdict is [`Verdict::Compact`].
    pub groups: Vec<Vec<usize>>,
    /// Bytes of the files that will be rewritten (0 unless the verdict is `Compact`).
    pub bytes_to_rewrite: u64,
    /// Live delete files that can delete rows of the partition's data files (applied by the
    /// rewrite when it compacts).
    pub delete_files: u64,
    /// Delete files the committed rewrite removed because they no longer apply to any live
    /// data file (they applied to this partition's rewritten files).
    pub delete_files_removed: u64,
    /// After a commit: the data files written for the partition.
    pub files_written: Option<u64>,
    /// Small files among the groups' inputs (the rest are rewritten for their deleted rows).
    pub small_inputs: u64,
    /// Rows the groups' own deletes (deletion vectors) delete: purged by the rewrite.
    pub rows_purged: u64,
    /// Files rewritten alone or with the small ones because of their deleted rows.
    pub files_purged: u64,
}

impl PartitionPlan {
    /// Leaves the partition alone: skipped for `why` (`skipped: {why}`), nothing rewritten.
    pub fn skip(&mut self, why: &str) {
        self.verdict = Verdict::Skipped;
        self.groups.clear();
        self.bytes_to_rewrite = 0;
        self.small_inputs = 0;
        self.rows_purged = 0;
        self.files_purged = 0;
        self.reason = format!("skipped: {why}");
    }

    /// Files rewritten.
    pub fn input_files(&self) -> u64 {
        self.groups.iter().map(|g| g.len() as u64).sum()
    }

    /// Live data files once the plan is applied (after a commit: the files it wrote).
    pub fn files_after(&self) -> u64 {
        self.files_before - self.input_files() + self.output_files()
    }

    /// Files the plan writes (after a commit: the files written, which a group whose every row
    /// was deleted does not add to).
    pub fn output_files(&self) -> u64 {
        self.files_written.unwrap_or(self.groups.len() as u64)
    }
}

/// Plans compaction of `files` (the current snapshot's live files). `output_ratio` is the
/// rewrite's output bytes per input byte (1.0 when unknown): groups hold about
/// `target / output_ratio` input bytes, so that each output file lands near the target.
pub fn plan(files: &[DataFile], options: &CompactionOptions, output_ratio: f64) -> Vec<PartitionPlan> {
    plan_naming_deletes(files, options, output_ratio, "delete files")
}

/// Per data file (by index), how many of the delete files among `files` apply to it
/// ([`DataFile::applies_to`]); files no delete applies to are absent.
fn delete_files_per_data_file(files: &[DataFile]) -> HashMap<usize, u64> {
    let deletes: Vec<&DataFile> = files.iter().filter(|f| f.content != FileContent::Data).collect();
    let mut by_scope: BTreeMap<&PartitionKey, Vec<&DataFile>> = BTreeMap::new();
    let mut global = Vec::new();
    for d in deletes {
        if d.global { global.push(d) } else { by_scope.entry(&d.key).or_default().push(d) }
    }
    let mut counts = HashMap::new();
    for (i, f) in files.iter().enumerate().filter(|(_, f)| f.content == FileContent::Data) {
        let scoped = by_scope.get(&f.key).map(Vec::as_slice).unwrap_or_default();
        let n = scoped.iter().chain(global.iter()).filter(|d| d.applies_to(f)).count() as u64;
        if n > 0 {
            counts.insert(i, n);
        }
    }
    counts
}

/// [`plan`], naming the delete files of a skipped partition as the format does (`deletion
/// vectors` for Delta).
pub fn plan_naming_deletes(
    files: &[DataFile],
    options: &CompactionOptions,
    output_ratio: f64,
    deletes: &str,
) -> Vec<PartitionPlan> {
    let planner = Planner::new(files, options, output_ratio, deletes);
    profile(files, &options.verdict_thresholds()).into_iter().map(|p| planner.partition(&p)).collect()
}

/// What planning one partition needs to know of all of `files`, gathered once.
struct Planner<'a> {
    files: &'a [DataFile],
    options: &'a CompactionOptions,
    /// How the format names its delete files in a reason.
    deletes: &'a str,
    small_limit: f64,
    /// A group's input bytes that make about `target_file_size_mb` of output.
    target_bytes: u64,
    /// Per partition: its small Parquet files, and how many small files are in another format.
    small_by_partition: BTreeMap<&'a PartitionKey, (Vec<usize>, u64)>,
    /// Per data file path: the rows its own deletes (deletes that name it) delete.
    own_deletes: HashMap<&'a str, u64>,
    /// Per partition: the data file each of its own deletes names (None: not a live data file).
    per_file_deletes: BTreeMap<&'a PartitionKey, Vec<Option<usize>>>,
    /// Per partition: the Parquet data files whose deleted share, or count of delete files,
    /// reaches its threshold.
    purge_by_partition: BTreeMap<&'a PartitionKey, Vec<usize>>,
}

impl<'a> Planner<'a> {
    fn new(files: &'a [DataFile], options: &'a CompactionOptions, output_ratio: f64, deletes: &'a str) -> Self {
        let small_limit = options.thresholds.small_file_threshold_bytes();
        let ratio = if output_ratio.is_finite() && output_ratio > 0.0 { output_ratio } else { 1.0 };
        let mut small_by_partition: BTreeMap<&PartitionKey, (Vec<usize>, u64)> = BTreeMap::new();
        for (i, f) in files.iter().enumerate() {
            if f.content == FileContent::Data && (f.size_bytes as f64) < small_limit {
                let (parquet, other) = small_by_partition.entry(&f.key).or_default();
                if f.parquet { parquet.push(i) } else { *other += 1 }
            }
        }
        let data_index: HashMap<&str, usize> = files
            .iter()
            .enumerate()
            .filter(|(_, f)| f.content == FileContent::Data)
            .map(|(i, f)| (f.path.as_str(), i))
            .collect();
        let mut own_deletes: HashMap<&str, u64> = HashMap::new();
        let mut per_file_deletes: BTreeMap<&PartitionKey, Vec<Option<usize>>> = BTreeMap::new();
        for f in files {
            if f.content == FileContent::PositionDeletes
                && let Some(data) = &f.referenced_data_file
            {
                *own_deletes.entry(data.as_str()).or_default() += f.record_count;
                per_file_deletes.entry(&f.key).or_default().push(data_index.get(data.as_str()).copied());
            }
        }
        let mut planner = Planner {
            files,
            options,
            deletes,
            small_limit,
            target_bytes: (options.target_file_size_mb * MIB / ratio) as u64,
            small_by_partition,
            own_deletes,
            per_file_deletes,
            purge_by_partition: BTreeMap::new(),
        };
        planner.purge_by_partition = planner.purges();
        planner
    }

    /// The rows data file `i`'s own deletes delete.
    fn deleted_rows(&self, i: usize) -> u64 {
        self.own_deletes.get(self.files[i].path.as_str()).copied().unwrap_or(0)
    }

    /// Per partition, the Parquet data files degraded by their deletes (none unless
    /// `apply_deletes`).
    fn purges(&self) -> BTreeMap<&'a PartitionKey, Vec<usize>> {
        let (files, options) = (self.files, self.options);
        let mut purge_by_partition: BTreeMap<&PartitionKey, Vec<usize>> = BTreeMap::new();
        if !options.apply_deletes {
            return purge_by_partition;
        }
        let delete_files = options.delete_file_threshold.map(|_| delete_files_per_data_file(files));
        for (i, f) in files.iter().enumerate() {
            if f.content != FileContent::Data || !f.parquet {
                continue;
            }
            let deleted = self.deleted_rows(i);
            let by_ratio = options.delete_ratio_threshold.is_some_and(|limit| {
                deleted > 0 && f.record_count > 0 && deleted as f64 / f.record_count as f64 >= limit
            });
            let by_count = match (options.delete_file_threshold, &delete_files) {
                (Some(limit), Some(counts)) => counts.get(&i).is_some_and(|&n| n >= limit),
                _ => false,
            };
            if by_ratio || by_count {
                purge_by_partition.entry(&f.key).or_default().push(i);
            }
        }
        purge_by_partition
    }

    /// The plan of partition `p`: settled or skipped with its reason, else its groups — the
    /// small files bin-packed when fragmentation degrades it, then the files its deletes degrade.
    fn partition(&self, p: &PartitionProfile) -> PartitionPlan {
        let (files, options) = (self.files, self.options);
        let mut plan = unplanned(p);
        let purge = self.purge_by_partition.get(&p.key).map(Vec::as_slice).unwrap_or_default();
        if settle(p, options, !purge.is_empty(), &mut plan) {
            return plan;
        } else if options.recent.contains(&p.key) {
            plan.reason = "skipped: still being written".into();
            return plan;
        } else if p.applicable_delete_files > 0 && !options.apply_deletes {
            plan.reason = format!("skipped: has {} {}", p.applicable_delete_files, self.deletes);
            return plan;
        }
        let compaction = self.group_small_files(p, &mut plan);
        let compacted = plan.input_files();
        plan.small_inputs = compacted;
        let purge_outputs = self.group_purged(purge, &mut plan);
        plan.files_purged = purge.len() as u64;
        plan.rows_purged = plan.groups.iter().flatten().map(|&i| self.deleted_rows(i)).sum();
        plan.bytes_to_rewrite = plan.groups.iter().flatten().map(|&i| files[i].size_bytes).sum();
        if plan.groups.is_empty() {
            plan.reason = format!("skipped: {compaction}");
            return plan;
        }
        plan.verdict = Verdict::Compact;
        plan.reason = self.reason(p, &plan, compacted, plan.groups.len() - purge_outputs, purge.len());
        plan
    }

    /// Small files, bin-packed into `plan.groups` when fragmentation degrades partition `p`;
    /// why not, when it groups none.
    fn group_small_files(&self, p: &PartitionProfile, plan: &mut PartitionPlan) -> String {
        if !p.requires_compaction {
            return p.reason.clone();
        }
        let (small, not_parquet) = &self.small_by_partition[&p.key];
        if *not_parquet >= 1 && (small.len() as u64) < self.options.min_input_files {
            return format!("{not_parquet} of its small files are not Parquet (only Parquet files are rewritten)");
        }
        plan.groups = bin_pack(small.iter().map(|&i| (i, self.files[i].size_bytes)), self.target_bytes);
        match plan.groups.is_empty() {
            true => "no group of two or more small files fits the target".into(),
            false => String::new(),
        }
    }

    /// Files degraded by their deleted rows and not in a group yet, added to `plan.groups`:
    /// bin-packed among themselves toward the target (each is rewritten anyway), alone where no
    /// other fits. Returns how many groups (outputs) they make.
    fn group_purged(&self, purge: &[usize], plan: &mut PartitionPlan) -> usize {
        let files = self.files;
        let grouped: HashSet<usize> = plan.groups.iter().flatten().copied().collect();
        let purged: Vec<usize> = purge.iter().copied().filter(|i| !grouped.contains(i)).collect();
        plan.small_inputs += purged.iter().filter(|&&i| (files[i].size_bytes as f64) < self.small_limit).count() as u64;
        let mut purge_groups = bin_pack(purged.iter().map(|&i| (i, files[i].size_bytes)), self.target_bytes);
        let packed: HashSet<usize> = purge_groups.iter().flatten().copied().collect();
        purge_groups.extend(purged.iter().filter(|i| !packed.contains(i)).map(|&i| vec![i]));
        let purge_outputs = purge_groups.len();
        plan.groups.extend(purge_groups);
        purge_outputs
    }

    /// Why partition `p` is compacted: `compacted` small files into `outputs` files, `purged`
    /// files for their deletes, and the delete files applied.
    fn reason(
        &self,
        p: &PartitionProfile,
        plan: &PartitionPlan,
        compacted: u64,
        outputs: usize,
        purged: usize,
    ) -> String {
        let options = self.options;
        let mut parts = Vec::new();
        if compacted > 0 {
            parts.push(format!(
                "compact: ratio {:.2} >= {}, {compacted} small files -> {outputs} {}",
                p.fragmentation_ratio,
                options.thresholds.fragmentation_ratio_threshold,
                if outputs == 1 { "file" } else { "files" },
            ));
        }
        if purged > 0 {
            parts.push(format!(
                "purge: {} {} with >= {}% of rows deleted",
                purged,
                if purged == 1 { "file" } else { "files" },
                options.delete_ratio_threshold.unwrap_or(0.0) * 100.0
            ));
        }
        // Where deletes are per file (the format purges), only those of the rewritten files.
        let grouped: HashSet<usize> = plan.groups.iter().flatten().copied().collect();
        let not_applied = self
            .per_file_deletes
            .get(&p.key)
            .map_or(0, |named| named.iter().filter(|i| i.is_none_or(|i| !grouped.contains(&i))).count() as u64);
        let applied = p.applicable_delete_files.saturating_sub(not_applied);
        let applying = match options.delete_ratio_threshold.map_or(p.applicable_delete_files, |_| applied) {
            0 => String::new(),
            n => format!(", applying {n} {}", self.deletes),
        };
        format!("{}{applying}", parts.join("; "))
    }
}

/// [`plan_naming_deletes`] of `files`, and the `settled` partitions — profiled without reading
/// their files (none is in `files`), none needing compaction and no delete file applying to them
/// — planned from their figures alone; all in the profile's order (label, then spec and tuple).
pub fn plan_with_settled(
    files: &[DataFile],
    settled: &[PartitionProfile],
    options: &CompactionOptions,
    output_ratio: f64,
    deletes: &str,
) -> Vec<PartitionPlan> {
    let mut plans = plan_naming_deletes(files, options, output_ratio, deletes);
    for p in settled {
        let mut plan = unplanned(p);
        if !settle(p, options, false, &mut plan) {
            // Not reached: a partition is settled only when its profile needs no compaction.
            plan.reason = "skipped: its files were not read".into();
        }
        plans.push(plan);
    }
    plans.sort_by(|a, b| (a.partition.as_str(), &a.key).cmp(&(b.partition.as_str(), &b.key)));
    plans
}

/// A partition's plan before any verdict: its figures, skipped, nothing to rewrite.
fn unplanned(p: &PartitionProfile) -> PartitionPlan {
    PartitionPlan {
        partition: p.partition.clone(),
        spec_id: p.spec_id,
        key: p.key.clone(),
        verdict: Verdict::Skipped,
        reason: String::new(),
        files_before: p.total_files,
        small_files_before: p.small_files,
        groups: Vec::new(),
        bytes_to_rewrite: 0,
        delete_files: p.applicable_delete_files,
        delete_files_removed: 0,
        files_written: None,
        small_inputs: 0,
        rows_purged: 0,
        files_purged: 0,
    }
}

/// Decides `plan` where the partition's figures suffice — not in the `partitions` list,
/// rewritten by Spark, or healthy (`purges`: some file of it is degraded by its deleted rows) —
/// and says whether it did.
fn settle(p: &PartitionProfile, options: &CompactionOptions, purges: bool, plan: &mut PartitionPlan) -> bool {
    let selected = options.partitions.as_ref().is_none_or(|list| list.iter().any(|l| l == &p.partition));
    if !selected {
        plan.reason = "skipped: not in the partitions list".into();
    } else if options.only.as_ref().is_some_and(|only| !only.contains(&p.key)) {
        plan.reason = "skipped: not re-planned".into();
    } else if options.excluded.contains(&p.key) {
        plan.reason = "skipped: rewritten by Spark".into();
    } else if !p.requires_compaction && !purges {
        // The profile's verdict, in its words (`healthy: …`, `nothing to merge: …`).
        plan.verdict = Verdict::Healthy;
        plan.reason = p.reason.clone();
    } else {
        return false;
    }
    true
}

/// How many groups [`bin_pack`] makes of `total` bytes toward `target`: `round(total / target)`,
/// at least one.
pub fn group_count(total: u64, target: u64) -> usize {
    ((total as f64 / target.max(1) as f64).round() as usize).max(1)
}

/// Balanced bin-packing: `round(total / target)` groups (at least one), filled largest file
/// first into the least-filled group, so groups come out of even size, each within about a third
/// of the target (258 MiB at 128 MiB gives two 129 MiB groups, not 128 + 128 + 2.6). Sizes are
/// input bytes; a rewrite usually compresses at least as well, so rounding down the group count
/// rather than up keeps outputs from landing under the small-file threshold. Groups of a single
/// file are dropped.
pub fn bin_pack(items: impl IntoIterator<Item = (usize, u64)>, target: u64) -> Vec<Vec<usize>> {
    let mut items: Vec<(usize, u64)> = items.into_iter().collect();
    let total: u64 = items.iter().map(|(_, size)| size).sum();
    let count = group_count(total, target);
    items.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut bins: Vec<(u64, Vec<usize>)> = vec![(0, Vec::new()); count.min(items.len().max(1))];
    for (index, size) in items {
        let lightest = bins.iter_mut().min_by_key(|(used, _)| *used).expect("at least one bin");
        lightest.0 += size;
        lightest.1.push(index);
    }
    bins.into_iter().map(|(_, members)| members).filter(|m| m.len() >= 2).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::Thresholds;

    fn file(partition: &str, kib: u64, content: FileContent) -> DataFile {
        DataFile::for_tests(partition, kib * 1024, content)
    }

    fn options(small_kib: f64, target_kib: f64) -> CompactionOptions {
        CompactionOptions {
            thresholds: Thresholds::new(small_kib / 1024.0, 0.35).unwrap(),
            target_file_size_mb: target_kib / 1024.0,
            delete_ratio_threshold: Some(DELTA_DELETE_RATIO_THRESHOLD),
            ..Default::default()
        }
    }

    #[test]
    fn bin_pack_fills_to_target_and_drops_singletons() {
        let cases: Vec<(Vec<u64>, u64, Vec<Vec<usize>>)> = vec![
            // 200 bytes at target 100: two groups of 110 and 90
            (vec![60, 50, 40, 30, 20], 100, vec![vec![0, 3, 4], vec![1, 2]]),
            (vec![10; 4], 100, vec![vec![0, 1, 2, 3]]),
            // 9 × 30 = 270 at target 100: three even groups of 90
            (vec![30; 9], 100, vec![vec![0, 3, 6], vec![1, 4, 7], vec![2, 5, 8]]),
            // 11 × 20 = 220 at target 100: two groups of 120 and 100, no 20-byte remainder
            (vec![20; 11], 100, vec![vec![0, 2, 4, 6, 8, 10], vec![1, 3, 5, 7, 9]]),
            (vec![90, 80], 100, vec![]),
            (vec![], 100, vec![]),
        ];
        for (sizes, target, want) in cases {
            let got = bin_pack(sizes.iter().copied().enumerate(), target);
            assert_eq!(got, want, "{sizes:?}");
        }
    }

    #[test]
    fn groups_are_even_and_no_group_exceeds_target_by_a_file() {
        let sizes: Vec<u64> = (1..=200).map(|i| 1000 + (i * 37) % 900).collect();
        let target = 20_000;
        let groups = bin_pack(sizes.iter().copied().enumerate(), target);
        let totals: Vec<u64> = groups.iter().map(|g| g.iter().map(|&i| sizes[i]).sum()).collect();
        let total: u64 = sizes.iter().sum();
        assert_eq!(groups.len() as u64, (total as f64 / target as f64).round() as u64);
        let max_file = *sizes.iter().max().unwrap();
        assert!(totals.iter().all(|t| (*t as f64) < target as f64 * 1.5 + max_file as f64), "{totals:?}");
        assert!(totals.iter().max().unwrap() - totals.iter().min().unwrap() <= max_file, "{totals:?}");
        assert_eq!(groups.iter().map(Vec::len).sum::<usize>(), sizes.len(), "every file is placed once");
    }

    #[test]
    fn only_degraded_partitions_get_groups() {
        let mut files = Vec::new();
        files.extend((0..10).map(|_| file("d=1", 10, FileContent::Data)));
        files.extend((0..10).map(|_| file("d=2", 500, FileContent::Data)));
        files.push(file("d=2", 10, FileContent::Data));
        let plans = plan(&files, &options(100.0, 45.0), 1.0);
        assert_eq!(plans.len(), 2);
        assert_eq!(plans[0].verdict, Verdict::Compact);
        assert_eq!(plans[0].groups.len(), 2, "100 KiB at a 45 KiB target: round(2.2) = 2 groups of 5 files");
        assert_eq!(plans[0].files_after(), 2);
        assert_eq!(plans[0].bytes_to_rewrite, 100 * 1024);
        assert_eq!(plans[1].verdict, Verdict::Healthy);
        assert!(plans[1].reason.starts_with("healthy: ratio 0.09 < 0.35"), "{}", plans[1].reason);
        assert!(plans[1].groups.is_empty());
        // Outputs measured at half their inputs' size: groups of twice the target in input bytes.
        let halved = plan(&files, &options(100.0, 45.0), 0.5);
        assert_eq!(halved[0].groups.len(), 1, "100 KiB of input -> ~50 KiB of output: round(50 / 45) = 1 file");
        assert_eq!(plan(&files, &options(100.0, 45.0), f64::NAN)[0].groups.len(), 2, "an unusable ratio counts as 1");
    }

    #[test]
    fn delete_files_min_input_and_partition_list_skip() {
        let mut files = vec![file("a=1", 1, FileContent::Data), file("a=1", 1, FileContent::Data)];
        files.push(file("a=1", 1, FileContent::PositionDeletes));
        files.push(file("a=2", 1, FileContent::Data));
        files.extend((0..3).map(|_| file("a=3", 1, FileContent::Data)));
        let mut opts = CompactionOptions { apply_deletes: false, ..options(100.0, 1000.0) };
        let plans = plan(&files, &opts, 1.0);
        let reasons: Vec<&str> = plans.iter().map(|p| p.reason.as_str()).collect();
        assert_eq!(reasons[0], "skipped: has 1 delete files");
        let applied = plan(&files, &options(100.0, 1000.0), 1.0);
        assert_eq!(applied[0].reason, "compact: ratio 1.00 >= 0.35, 2 small files -> 1 file, applying 1 delete files");
        assert_eq!((applied[0].delete_files, applied[0].groups.len()), (1, 1));
        assert_eq!(reasons[1], "healthy: nothing to merge, 1 small file < min_input_files 2");
        assert_eq!(plans[1].verdict, Verdict::Healthy, "one small file: compaction cannot improve it");
        assert!(reasons[2].starts_with("compact:"), "{}", reasons[2]);
        opts.partitions = Some(vec!["a=1".into()]);
        let plans = plan(&files, &opts, 1.0);
        assert_eq!(plans[2].reason, "skipped: not in the partitions list");
        assert!(plans.iter().all(|p| p.groups.is_empty()));
        // What the SQL functions rely on: a plan that does not compact rewrites nothing.
        for p in
            plan(&files, &options(100.0, 1000.0), 1.0).iter().chain(&plans).filter(|p| p.verdict != Verdict::Compact)
        {
            assert!(p.groups.is_empty() && p.bytes_to_rewrite == 0 && p.files_after() == p.files_before, "{p:?}");
        }
    }

    /// A data file of `rows` rows and, when `deleted` > 0, a deletion vector naming it.
    fn with_vector(files: &mut Vec<DataFile>, partition: &str, kib: u64, rows: u64, deleted: u64) -> usize {
        let mut data = file(partition, kib, FileContent::Data);
        data.record_count = rows;
        if deleted > 0 {
            let mut dv = file(partition, 0, FileContent::PositionDeletes);
            dv.record_count = deleted;
            dv.referenced_data_file = Some(data.path.clone());
            files.push(dv);
        }
        files.push(data);
        files.len() - 1
    }

    #[test]
    fn files_degraded_by_deleted_rows_are_purged_alone_or_with_the_small_ones() {
        let mut files = Vec::new();
        // p=1: healthy by size; one file 10 % deleted, one 2 %.
        let heavy = with_vector(&mut files, "p=1", 500, 100, 10);
        let light = with_vector(&mut files, "p=1", 500, 100, 2);
        // p=2: degraded by small files (one 50 % deleted) and a large file 20 % deleted.
        let small: Vec<usize> =
            (0..4).map(|i| with_vector(&mut files, "p=2", 10, 10, if i == 0 { 5 } else { 0 })).collect();
        let large = with_vector(&mut files, "p=2", 500, 100, 20);
        let plans = plan(&files, &options(100.0, 1000.0), 1.0);
        let (p1, p2) = (&plans[0], &plans[1]);
        assert_eq!((p1.verdict, p1.groups.clone()), (Verdict::Compact, vec![vec![heavy]]));
        assert_eq!(p1.reason, "purge: 1 file with >= 5% of rows deleted, applying 1 delete files");
        assert_eq!((p1.rows_purged, p1.files_purged, p1.small_inputs, p1.delete_files), (10, 1, 0, 2));
        assert_eq!(p1.files_after(), 2, "a file purged alone is replaced by one");
        assert_eq!(p2.verdict, Verdict::Compact);
        let mut grouped: Vec<Vec<usize>> = p2
            .groups
            .iter()
            .map(|g| {
                let mut g = g.clone();
                g.sort();
                g
            })
            .collect();
        grouped.sort();
        let mut want = vec![small.clone(), vec![large]];
        want.sort();
        assert_eq!(grouped, want);
        assert_eq!(
            p2.reason,
            "compact: ratio 0.80 >= 0.35, 4 small files -> 1 file; purge: 2 files with >= 5% of rows deleted, applying 2 delete files"
        );
        assert_eq!((p2.rows_purged, p2.small_inputs), (25, 4));
        // Medium files degraded by deleted rows are packed toward the target, not rewritten one by one.
        let mut medium = files.clone();
        let packed: Vec<usize> = (0..4).map(|_| with_vector(&mut medium, "p=3", 300, 100, 10)).collect();
        let plans = plan(&medium, &options(100.0, 1000.0), 1.0);
        let p3 = plans.iter().find(|p| p.partition == "p=3").unwrap();
        assert_eq!(p3.groups.len(), 1, "{p3:?}");
        let mut group = p3.groups[0].clone();
        group.sort();
        assert_eq!((group, p3.rows_purged, p3.files_after()), (packed, 40, 1));
        // Any deleted row (REORG … APPLY (PURGE)): the light file too.
        let any = plan(&files, &CompactionOptions { delete_ratio_threshold: Some(0.0), ..options(100.0, 1000.0) }, 1.0);
        let mut both = any[0].groups.concat();
        both.sort();
        assert_eq!((any[0].groups.len(), both), (1, vec![heavy, light]), "two half-target files purged into one");
        // No purging, or deletes not applied: p=1 is healthy again, p=2 compacts its small files only.
        for opts in [
            CompactionOptions { delete_ratio_threshold: None, ..options(100.0, 1000.0) },
            CompactionOptions { apply_deletes: false, ..options(100.0, 1000.0) },
        ] {
            let plans = plan(&files, &opts, 1.0);
            assert_eq!(plans[0].verdict, Verdict::Healthy, "{opts:?}");
            assert!(plans[1].groups.iter().flatten().all(|i| small.contains(i)), "{opts:?}");
        }
        for bad in [-0.1, 1.5, f64::NAN] {
            let opts = CompactionOptions { delete_ratio_threshold: Some(bad), ..options(100.0, 1000.0) };
            assert!(opts.validate().unwrap_err().message().contains("delete_ratio_threshold"), "{bad}");
        }
        let zero = CompactionOptions { delete_file_threshold: Some(0), ..options(100.0, 1000.0) };
        assert!(zero.validate().unwrap_err().message().contains("delete_file_threshold"));
    }

    #[test]
    fn files_that_many_delete_files_apply_to_are_rewritten() {
        // One large file in p=1 that two partition-scoped delete files (one equality, one
        // position) and one global equality delete apply to; another in p=2 with one.
        let mut files = vec![
            DataFile { record_count: 100, ..file("p=1", 900, FileContent::Data) },
            DataFile { record_count: 100, ..file("p=2", 900, FileContent::Data) },
            DataFile { data_sequence_number: 1, ..file("p=1", 1, FileContent::EqualityDeletes) },
            DataFile { data_sequence_number: 1, ..file("p=1", 1, FileContent::PositionDeletes) },
            DataFile { data_sequence_number: 1, ..file("p=2", 1, FileContent::PositionDeletes) },
        ];
        files.push(DataFile { data_sequence_number: 1, global: true, ..file("g", 1, FileContent::EqualityDeletes) });
        let no_ratio = |n| CompactionOptions {
            delete_ratio_threshold: None,
            delete_file_threshold: Some(n),
            ..options(100.0, 1000.0)
        };
        let rewritten_of = |files: &[DataFile], opts: &CompactionOptions| -> Vec<usize> {
            let mut all: Vec<usize> = plan(files, opts, 1.0).iter().flat_map(|p| p.groups.concat()).collect();
            all.sort();
            all
        };
        let rewritten = |opts: &CompactionOptions| rewritten_of(&files, opts);
        assert_eq!(rewritten(&no_ratio(3)), vec![0], "3 delete files apply to the p=1 file, 2 to the p=2 one");
        assert_eq!(rewritten(&no_ratio(2)), vec![0, 1]);
        assert_eq!(rewritten(&no_ratio(4)), Vec::<usize>::new());
        let off = CompactionOptions { delete_ratio_threshold: None, ..options(100.0, 1000.0) };
        assert_eq!(rewritten(&off), Vec::<usize>::new(), "neither threshold: large files stay");
        // Deletes at a lower sequence number than the data file do not apply.
        files[0].data_sequence_number = 5;
        assert_eq!(rewritten_of(&files, &no_ratio(2)), vec![1]);
    }

    #[test]
    fn recent_partitions_are_held_back_unless_healthy() {
        let mut files: Vec<DataFile> = (0..4).map(|_| file("d=today", 1, FileContent::Data)).collect();
        files.extend((0..4).map(|_| file("d=yesterday", 1, FileContent::Data)));
        files.push(file("d=big", 500, FileContent::Data));
        let recent = vec![files[0].key.clone(), files[8].key.clone()];
        let plans = plan(&files, &CompactionOptions { recent, ..options(100.0, 1000.0) }, 1.0);
        let of = |label: &str| plans.iter().find(|p| p.partition == label).unwrap();
        assert_eq!(of("d=today").reason, "skipped: still being written");
        assert!(of("d=today").groups.is_empty());
        assert_eq!(of("d=yesterday").verdict, Verdict::Compact);
        assert_eq!(of("d=big").verdict, Verdict::Healthy, "a healthy partition says so, recent or not");
    }

    #[test]
    fn only_parquet_files_are_rewritten() {
        let orc = |p: &str| DataFile { parquet: false, ..file(p, 1, FileContent::Data) };
        let mut files: Vec<DataFile> = (0..3).map(|_| orc("a=1")).collect();
        files.push(file("a=1", 1, FileContent::Data));
        files.extend((0..2).map(|_| orc("a=2")));
        files.extend((0..2).map(|_| file("a=2", 1, FileContent::Data)));
        let plans = plan(&files, &options(100.0, 1000.0), 1.0);
        assert_eq!(plans[0].reason, "skipped: 3 of its small files are not Parquet (only Parquet files are rewritten)");
        assert!(plans[0].groups.is_empty());
        assert_eq!(plans[1].verdict, Verdict::Compact, "{}", plans[1].reason);
        assert_eq!(plans[1].groups, vec![vec![6, 7]], "the two Parquet files, never the ORC ones");
    }

    #[test]
    fn partitions_are_told_apart_by_tuple_not_label() {
        // Two tuples that print alike ("null" the string and a real null) never share a group.
        let mut files: Vec<DataFile> = (0..6).map(|_| file("s=null", 1, FileContent::Data)).collect();
        for f in &mut files[3..] {
            f.key.values = "[None]".into();
        }
        let plans = plan(&files, &options(100.0, 1000.0), 1.0);
        assert_eq!(plans.len(), 2);
        for p in &plans {
            assert_eq!(p.verdict, Verdict::Compact, "{p:?}");
            assert!(p.groups.iter().flatten().all(|&i| files[i].key == p.key), "{p:?}");
            assert_eq!(p.input_files(), 3);
        }
        // A global delete file (an unpartitioned spec's) of a later sequence number makes every
        // older partition unsafe to rewrite without applying it.
        let mut global = file("(unpartitioned)", 1, FileContent::EqualityDeletes);
        (global.global, global.data_sequence_number, global.key.spec_id) = (true, 1, 1);
        files.push(global);
        let no_apply = CompactionOptions { apply_deletes: false, ..options(100.0, 1000.0) };
        let plans = plan(&files, &no_apply, 1.0);
        assert!(plans.iter().all(|p| p.reason == "skipped: has 1 delete files"), "{plans:?}");
        let plans = plan(&files, &options(100.0, 1000.0), 1.0);
        assert!(plans.iter().all(|p| p.verdict == Verdict::Compact && p.delete_files == 1), "{plans:?}");
    }

    #[test]
    fn invalid_options() {
        let bad = [
            CompactionOptions { target_file_size_mb: 0.0, ..Default::default() },
            CompactionOptions { target_file_size_mb: 32.0, ..Default::default() },
            CompactionOptions { min_input_files: 1, ..Default::default() },
        ];
        for o in bad {
            assert!(o.validate().is_err(), "{o:?}");
        }
        assert!(CompactionOptions::default().validate().is_ok());
    }
}
