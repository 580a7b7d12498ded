//! Manifest rewrite (Spark's `rewrite_manifests`): the current snapshot's small manifests are
//! merged, per content (data or deletes) and partition spec, into manifests of about
//! `commit.manifest.target-size-bytes`, their entries clustered by partition tuple so that a scan
//! filtering on the partition opens few manifests. One `replace` snapshot; no data file is read,
//! written or removed.
//!
//! Safety rules:
//! - every live entry is carried over as EXISTING with its data and file sequence numbers and the
//!   snapshot that added it (so equality deletes keep applying exactly as before and expiry keeps
//!   attributing the file); deleted entries are dropped, as any commit drops them;
//! - before the commit the written manifests are read back (with apache-avro, a reader
//!   independent of ours) and must list exactly the live entries of the manifests they replace
//!   (path, content, the snapshot that added it, sequence numbers, record count, size), EXISTING;
//! - the commit is exclusive (catalog or `vN.metadata.json`) and retried on a moved head by
//!   planning again; on any failure the manifests and list we wrote are removed.

use std::collections::{BTreeMap, HashMap};

use iceberg::spec::{FormatVersion, ManifestContentType, ManifestFile, Operation, PartitionSpec};

use crate::error::{Error, ErrorKind, Result};
use crate::interrupt;
use crate::interrupt::pause_for_tests;
use crate::runtime;
use crate::table::Located;
use crate::table::iceberg::commit::{commit_table, require_exclusive, settle_attempt};
use crate::table::iceberg::manifest_merge::{self, EntryKey};
use crate::table::iceberg::new_snapshot::manifest_writer;
use crate::table::iceberg::snapshot_builder::{SnapshotBuilder, carried_summary};
use crate::table::iceberg::{IcebergTable, load_manifest};

/// Iceberg's default `commit.manifest.target-size-bytes`.
pub const DEFAULT_TARGET_BYTES: u64 = 8 * 1024 * 1024;
/// A manifest below this share of the target is small (as metadata health counts them).
pub const SMALL_SHARE: f64 = 0.5;
/// Commit attempts before giving up on a table that keeps moving.
const MAX_COMMIT_ATTEMPTS: usize = 4;

/// What the user asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct RewriteManifestsOptions {
    /// Target manifest size in bytes; `None`: the table's `commit.manifest.target-size-bytes`.
    pub target_bytes: Option<u64>,
    /// Plan only.
    pub dry_run: bool,
    /// Merge a group only when its small manifests are at least this share of its manifests (the
    /// gate passes its fragmentation ratio threshold: manifests "bloated" as data files are
    /// degraded); `None`: whenever it has two or more.
    pub min_small_share: Option<f64>,
    /// Merge a group only when it has at least this many manifests.
    pub min_manifests: ManifestsToMerge,
}

/// How many manifests a group needs before it is merged.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ManifestsToMerge {
    /// Two small ones (the SQL function: asked for, so done).
    Two,
    /// The table's `commit.manifest.min-count-to-merge` (Iceberg's default 100): the count at
    /// which Java writers merge manifests on commit themselves (the gate).
    TableSetting,
}

/// The plan and outcome for one (content, spec) group of manifests.
#[derive(Debug, Clone, PartialEq)]
pub struct ManifestGroup {
    /// `data` or `deletes`.
    pub content: &'static str,
    /// Partition spec id.
    pub spec_id: i32,
    /// Manifests of this group in the current snapshot.
    pub manifests_before: u64,
    /// Of those, small ones.
    pub small_manifests: u64,
    /// Manifests the group has afterwards (or would have).
    pub manifests_after: u64,
    /// Live entries in the manifests merged.
    pub entries_rewritten: u64,
    /// Bytes of the manifests merged.
    pub bytes_before: u64,
    /// Bytes of the manifests written (dry run: estimated as `bytes_before`).
    pub bytes_after: u64,
    /// `merge` or `keep`, and why.
    pub reason: String,
    /// Indices (into the manifest list) merged, in bins of consecutive small manifests: one
    /// manifest written per bin.
    merged: Vec<Vec<usize>>,
}

impl ManifestGroup {
    /// Whether the group's small manifests are merged (or would be).
    pub fn merges(&self) -> bool {
        !self.merged.is_empty()
    }

    /// The manifests its merged ones become.
    pub fn outputs(&self) -> u64 {
        if self.merges() { self.manifests_after + self.small_manifests - self.manifests_before } else { 0 }
    }
}

/// What a manifest rewrite did (or, dry, would do).
#[derive(Debug, Clone)]
pub struct RewriteManifestsReport {
    /// One row per (content, spec) group of the current snapshot's manifests.
    pub groups: Vec<ManifestGroup>,
    /// The target used, bytes.
    pub target_bytes: u64,
    /// The committed snapshot.
    pub snapshot_id: Option<i64>,
    /// The metadata file now current.
    pub metadata_location: Option<String>,
    /// Whether nothing was written on purpose.
    pub dry_run: bool,
    /// What went wrong after the commit point without undoing it (a version hint not moved).
    pub warning: Option<String>,
}

impl RewriteManifestsReport {
    /// Whether the plan merges anything.
    pub fn merges(&self) -> bool {
        self.groups.iter().any(|g| !g.merged.is_empty())
    }
}

/// The table's manifest target: `commit.manifest.target-size-bytes`, else Iceberg's 8 MiB.
pub fn table_target_bytes(table: &IcebergTable) -> u64 {
    table
        .metadata
        .properties()
        .get("commit.manifest.target-size-bytes")
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|v| *v > 0)
        .unwrap_or(DEFAULT_TARGET_BYTES)
}

/// Iceberg's default `commit.manifest.min-count-to-merge`.
pub const DEFAULT_MIN_COUNT_TO_MERGE: u64 = 100;

fn min_manifests(table: &IcebergTable, rule: ManifestsToMerge) -> u64 {
    match rule {
        ManifestsToMerge::Two => 2,
        ManifestsToMerge::TableSetting => table
            .metadata
            .properties()
            .get("commit.manifest.min-count-to-merge")
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(DEFAULT_MIN_COUNT_TO_MERGE)
            .max(2),
    }
}

/// Plans which manifests merge: per content and spec, the small ones, when there are two or more.
/// `live`: each manifest's live entries.
fn plan(
    manifests: &[ManifestFile],
    live: &[u64],
    target_bytes: u64,
    min_small_share: Option<f64>,
    min_manifests: u64,
) -> Vec<ManifestGroup> {
    let small_below = target_bytes as f64 * SMALL_SHARE;
    let mut groups: BTreeMap<(u8, i32), Vec<usize>> = BTreeMap::new();
    for (i, m) in manifests.iter().enumerate() {
        let content = u8::from(m.content == ManifestContentType::Deletes);
        groups.entry((content, m.partition_spec_id)).or_default().push(i);
    }
    groups
        .into_iter()
        .map(|((content, spec_id), members)| {
            let small: Vec<usize> =
                members.iter().copied().filter(|&i| (manifests[i].manifest_length as f64) < small_below).collect();
            let bytes_before: u64 = small.iter().map(|&i| manifests[i].manifest_length as u64).sum();
            let entries: u64 = small.iter().map(|&i| live[i]).sum();
            let mut group = ManifestGroup {
                content: if content == 1 { "deletes" } else { "data" },
                spec_id,
                manifests_before: members.len() as u64,
                small_manifests: small.len() as u64,
                manifests_after: members.len() as u64,
                entries_rewritten: 0,
                bytes_before: 0,
                bytes_after: 0,
                reason: String::new(),
                merged: Vec::new(),
            };
            if small.len() < 2 {
                group.reason = format!(
                    "keep: {} small manifests (below {} bytes, half the {target_bytes}-byte target); merging needs 2",
                    small.len(),
                    small_below as u64
                );
                return group;
            }
            if (members.len() as u64) < min_manifests {
                group.reason =
                    format!("keep: {} manifests < commit.manifest.min-count-to-merge {min_manifests}", members.len());
                return group;
            }
            let share = small.len() as f64 / members.len() as f64;
            if let Some(min) = min_small_share
                && share < min
            {
                group.reason = format!(
                    "keep: {} of {} manifests are small (share {share:.2} < {min})",
                    small.len(),
                    members.len()
                );
                return group;
            }
            let bins = bins(&small, |i| manifests[i].manifest_length as u64, target_bytes);
            group.manifests_after = members.len() as u64 - small.len() as u64 + bins.len() as u64;
            group.entries_rewritten = entries;
            group.bytes_before = bytes_before;
            group.bytes_after = bytes_before;
            group.reason = format!(
                "merge: {} small manifests ({entries} live entries) -> {}, clustered by partition",
                small.len(),
                bins.len()
            );
            group.merged = bins;
            group
        })
        .collect()
}

/// `small` (two or more manifests) in bins of consecutive manifests of at most `target` bytes
/// together (a manifest alone at the end joins the bin before it): one manifest is written per
/// bin, holding only that bin's entries, so a merge holds one bin's entries at a time however
/// many it merges. Manifests listed in partition order (as appends by time leave them) give
/// bins of neighbouring partitions.
fn bins(small: &[usize], bytes: impl Fn(usize) -> u64, target: u64) -> Vec<Vec<usize>> {
    let mut bins: Vec<Vec<usize>> = Vec::new();
    let mut filled = 0u64;
    for &i in small {
        match bins.last_mut() {
            Some(bin) if filled + bytes(i) <= target => bin.push(i),
            _ => {
                bins.push(vec![i]);
                filled = 0;
            }
        }
        filled += bytes(i);
    }
    if bins.len() > 1
        && let Some(last) = bins.pop_if(|b| b.len() == 1)
        && let Some(before) = bins.last_mut()
    {
        before.extend(last);
    }
    bins
}

/// Each manifest's live (added or existing) entries: from the manifest list's counts, decoding
/// only a manifest whose list entry lacks them (format v1 lists may).
fn live_entries(table: &IcebergTable, manifests: &[ManifestFile]) -> Result<Vec<u64>> {
    let counted = |m: &ManifestFile| Some(m.added_files_count? as u64 + m.existing_files_count? as u64);
    let uncounted: Vec<ManifestFile> = manifests.iter().filter(|m| counted(m).is_none()).cloned().collect();
    let decoded: HashMap<String, u64> = table
        .decode_manifests(uncounted)?
        .iter()
        .map(|m| (m.file.manifest_path.clone(), m.manifest.entries().iter().filter(|e| e.is_alive()).count() as u64))
        .collect();
    Ok(manifests.iter().map(|m| counted(m).unwrap_or_else(|| decoded[&m.manifest_path])).collect())
}

/// The list entry of `file` with every count ([`crate::table::iceberg::with_counts`]): as it is
/// when the list gives them, else counted from its decoded entries.
fn with_all_counts(table: &IcebergTable, file: &ManifestFile) -> Result<ManifestFile> {
    if crate::table::iceberg::has_every_count(file) {
        return Ok(file.clone());
    }
    let decoded = table.decode_manifests(vec![file.clone()])?;
    Ok(crate::table::iceberg::with_counts(&decoded[0]))
}

/// Plans, and unless `dry_run` rewrites and commits, the current snapshot's small manifests.
pub fn rewrite_manifests(located: &Located, options: &RewriteManifestsOptions) -> Result<RewriteManifestsReport> {
    if let Some(0) = options.target_bytes {
        return Err(Error::invalid("target_manifest_size_mb must be positive"));
    }
    let mut located = located.clone();
    for _attempt in 0..MAX_COMMIT_ATTEMPTS {
        let table = IcebergTable::load(&located.metadata_location)?;
        let manifests = table.current_manifests()?;
        let target_bytes = options.target_bytes.unwrap_or_else(|| table_target_bytes(&table));
        let mut report = RewriteManifestsReport {
            groups: plan(
                &manifests,
                &live_entries(&table, &manifests)?,
                target_bytes,
                options.min_small_share,
                min_manifests(&table, options.min_manifests),
            ),
            target_bytes,
            snapshot_id: None,
            metadata_location: None,
            dry_run: options.dry_run,
            warning: None,
        };
        if options.dry_run || !report.merges() {
            return Ok(report);
        }
        require_exclusive(&located)?;
        interrupt::check("nothing was committed")?;
        let mut scratch: Vec<String> = Vec::new();
        let attempt = (|| {
            let (metadata, snapshot_id, written) = build(&table, &manifests, &mut report, &mut scratch)?;
            for (group, bytes) in report.groups.iter_mut().zip(written) {
                group.bytes_after = bytes;
            }
            pause_for_tests();
            interrupt::check("nothing was committed")?;
            Ok::<_, Error>((commit_table(&located, &table, &metadata)?, snapshot_id))
        })();
        if let Some(landed) = settle_attempt(&mut located, attempt, &scratch, "new manifests")? {
            report.snapshot_id = Some(landed.snapshot_id);
            report.metadata_location = Some(landed.location);
            report.warning = landed.warning;
            return Ok(report);
        }
    }
    Err(Error::conflict(format!(
        "the table kept changing; gave up after {MAX_COMMIT_ATTEMPTS} attempts; nothing was committed"
    )))
}

/// The spec and schema a group's manifests are written with when iceberg-rust writes them: the
/// spec as the manifests carry it, the schema the newest of them was written with (its
/// partition type is the one every entry's tuple has). Decoded once per group, when needed.
type GroupBinding = (iceberg::spec::SchemaRef, PartitionSpec);

/// Writes the live entries of the manifests of one bin into one manifest, clustered by
/// partition tuple (then path, for a stable order): lean, copying each entry's bytes
/// ([`manifest_merge`]), when it can, else with iceberg-rust (`newest`: the group's newest
/// manifest, whose spec and schema it writes with). The manifest is read back with apache-avro:
/// it must list exactly those entries, EXISTING. Returns its list entry and how many entries it
/// holds, for `snapshot` (whose scratch records the file) to name.
async fn merge_bin(
    snapshot: &mut SnapshotBuilder<'_>,
    bin: Vec<ManifestFile>,
    newest: &ManifestFile,
    binding: &mut Option<GroupBinding>,
) -> Result<(ManifestFile, u64)> {
    let (table, snapshot_id) = (snapshot.table(), snapshot.snapshot_id());
    let metadata = &table.metadata;
    let inputs = table.fetch_manifests(bin).await?;
    let path = snapshot.manifest_path("m0");
    let (file, expected) = match manifest_merge::merge(metadata, &inputs, &path, snapshot_id) {
        Some(merged) => {
            #[cfg(feature = "test-hooks")]
            manifest_merge::cross_check(metadata, &inputs, &merged).await.map_err(|e| {
                Error::new(
                    ErrorKind::CorruptMetadata,
                    format!("the lean manifest merge disagrees with iceberg-rust: {e}"),
                )
            })?;
            table.file_io.new_output(&path)?.write(merged.bytes.into()).await?;
            (merged.file, merged.expected)
        }
        None => {
            if binding.is_none() {
                let newest = load_manifest(&table.file_io, metadata, newest.clone()).await?;
                let m = newest.manifest.metadata();
                *binding = Some((m.schema().clone(), m.partition_spec().clone()));
            }
            let (schema, spec) = binding.clone().expect("bound above");
            write_with_iceberg_rust(table, inputs, &path, snapshot_id, schema, spec).await?
        }
    };
    // Read back what was written: exactly the live entries of the manifests it replaces.
    let written = crate::table::iceberg::files::read_file(&table.file_io, &path, "merged manifest").await?;
    let got = manifest_merge::read_back(&written).map_err(|e| {
        Error::new(
            ErrorKind::CorruptMetadata,
            format!("a merged manifest reads back wrong ({e}); nothing was committed"),
        )
    })?;
    let v1 = metadata.format_version() == FormatVersion::V1;
    let normalized = |keys: Vec<EntryKey>| {
        let mut keys: Vec<EntryKey> =
            keys.into_iter().map(|k| if v1 { k.without_sequence_numbers() } else { k }).collect();
        keys.sort();
        keys
    };
    let (want, got) = (normalized(expected), normalized(got));
    if want != got {
        return Err(Error::new(
            ErrorKind::CorruptMetadata,
            "the merged manifests do not list exactly the entries of the manifests they replace; nothing was \
             committed (this is a bug, please report it)",
        ));
    }
    Ok((file, want.len() as u64))
}

/// The live entries of `inputs` decoded by iceberg-rust and written by its manifest writer at
/// `path` as EXISTING (what the lean merge cannot copy); returns the list entry and the entries
/// written.
async fn write_with_iceberg_rust(
    table: &IcebergTable,
    inputs: Vec<(ManifestFile, bytes::Bytes)>,
    path: &str,
    snapshot_id: i64,
    schema: iceberg::spec::SchemaRef,
    spec: PartitionSpec,
) -> Result<(ManifestFile, Vec<EntryKey>)> {
    let content = inputs[0].0.content;
    // The entries taken out of the decoded manifests (no copy), clustered by partition tuple,
    // then path; each is moved into the writer.
    let mut entries: Vec<iceberg::spec::ManifestEntry> = Vec::new();
    for (file, bytes) in inputs {
        let manifest = crate::table::iceberg::manifest::decode_bytes(&bytes, &table.metadata, &file)?;
        drop(bytes);
        for e in manifest.into_parts().0 {
            let e = std::sync::Arc::try_unwrap(e).unwrap_or_else(|shared| (*shared).clone());
            if e.is_alive() {
                entries.push(e);
            }
        }
    }
    entries.sort_by_cached_key(|e| {
        (crate::table::iceberg::partition::canonical(e.data_file().partition()), e.file_path().to_string())
    });
    let version = table.metadata.format_version();
    let mut writer = manifest_writer(&table.file_io, path, snapshot_id, schema, spec, version, content)?;
    let mut expected: Vec<EntryKey> = Vec::with_capacity(entries.len());
    for mut e in entries {
        // Decoding applied inheritance: the snapshot id is set.
        let added_by = e.snapshot_id().unwrap_or(snapshot_id);
        let seq = e.sequence_number();
        let file_seq = e.file_sequence_number.or(seq);
        (e.snapshot_id, e.sequence_number, e.file_sequence_number) = (Some(added_by), Some(seq.unwrap_or(0)), file_seq);
        expected.push(EntryKey::of(&e));
        writer.add_existing_file(e.data_file, added_by, seq.unwrap_or(0), file_seq)?;
    }
    Ok((writer.write_manifest_file().await?, expected))
}

/// Writes the merged manifests and the manifest list; returns the new metadata, the snapshot id,
/// and per group the bytes written. Files written are recorded in `scratch`.
fn build(
    table: &IcebergTable,
    manifests: &[ManifestFile],
    report: &mut RewriteManifestsReport,
    scratch: &mut Vec<String>,
) -> Result<(iceberg::spec::TableMetadata, i64, Vec<u64>)> {
    let metadata = &table.metadata;
    let mut snapshot = SnapshotBuilder::new(table, scratch);
    let merged_ids: std::collections::HashSet<usize> =
        report.groups.iter().flat_map(|g| g.merged.iter().flatten().copied()).collect();
    let mut kept_count = 0usize;
    for (i, m) in manifests.iter().enumerate() {
        if !merged_ids.contains(&i) {
            snapshot.keep(with_all_counts(table, m)?);
            kept_count += 1;
        }
    }
    let mut bytes_per_group = Vec::new();
    let (mut created_count, mut replaced_count, mut entries_total) = (0usize, 0usize, 0u64);
    for group in &report.groups {
        if group.merged.is_empty() {
            bytes_per_group.push(0);
            continue;
        }
        // The latest commit's (snapshot ids are random: the sequence number orders commits).
        let newest = group.merged.iter().flatten().copied().max_by_key(|&i| (manifests[i].sequence_number, i));
        let newest = &manifests[newest.expect("a merged group has manifests")];
        let mut binding: Option<GroupBinding> = None;
        let mut written_bytes = 0u64;
        for bin in &group.merged {
            replaced_count += bin.len();
            let bin: Vec<ManifestFile> = bin.iter().map(|&i| manifests[i].clone()).collect();
            let (file, entries) = runtime::block_on(merge_bin(&mut snapshot, bin, newest, &mut binding))??;
            entries_total += entries;
            written_bytes += file.manifest_length as u64;
            created_count += 1;
            // Named as the manifests of added files are: before the kept ones.
            snapshot.add_manifest(file);
        }
        bytes_per_group.push(written_bytes);
    }
    // The totals stay what they were: carried over from the current snapshot's summary.
    let mut properties = carried_summary(metadata, |k| k.starts_with("total-"));
    properties.extend([
        ("manifests-created".to_string(), created_count.to_string()),
        ("manifests-replaced".to_string(), replaced_count.to_string()),
        ("manifests-kept".to_string(), kept_count.to_string()),
        ("entries-processed".to_string(), entries_total.to_string()),
    ]);
    let (next, snapshot_id) = runtime::block_on(snapshot.finish(Operation::Replace, properties, None))??;
    Ok((next, snapshot_id, bytes_per_group))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bins_fill_to_the_target_in_list_order_and_never_leave_one_manifest_alone() {
        let sizes = [40u64, 40, 30, 50, 60, 10, 100];
        let bytes = |i: usize| sizes[i];
        let all: Vec<usize> = (0..sizes.len()).collect();
        // 40+40 (+30 would pass 100) | 30+50 | 60+10 | 100, which joins the bin before it.
        assert_eq!(bins(&all, bytes, 100), vec![vec![0, 1], vec![2, 3], vec![4, 5, 6]]);
        assert_eq!(bins(&[0, 1, 2, 3], bytes, 100), vec![vec![0, 1], vec![2, 3]]);
        assert_eq!(bins(&[0, 1], bytes, 10), vec![vec![0, 1]]);
        assert_eq!(bins(&[0, 1, 2], bytes, 1000), vec![vec![0, 1, 2]]);
    }
}
