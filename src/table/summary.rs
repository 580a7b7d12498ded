//! What a listing of live files comes to per partition, streamed: the figures one manifest (or
//! any batch of live files) contributes — per-partition counts and sizes of its data files, its
//! delete files whole, the data files position deletes name — so that a profile of a million
//! files holds partitions, not files ([`crate::profile`] adds them up and judges them).

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use crate::store::location_key;
use crate::table::{DataFile, FileContent, PartitionKey};

/// One partition's figures over some of its live data files: what a manifest contributes, and,
/// merged, the whole partition.
#[derive(Debug, Clone, PartialEq)]
pub struct PartitionTally {
    /// Readable label.
    pub partition: String,
    /// Spec and value tuple.
    pub key: PartitionKey,
    /// Data files.
    pub files: u64,
    /// Data files below the small-file threshold.
    pub small_files: u64,
    /// Bytes of the data files.
    pub bytes: u64,
    /// Bytes of the small ones.
    pub small_bytes: u64,
    /// Rows (before deletes).
    pub records: u64,
    /// The lowest data sequence number among the files: a delete applies to some file of the
    /// partition exactly when it applies to that one (scope is per partition, the sequence rule
    /// monotone).
    pub oldest_sequence_number: i64,
    /// Data files per size bucket ([`size_bucket`]: four below the small-file threshold, three
    /// above).
    pub size_buckets: [u64; SIZE_BUCKETS],
}

/// Buckets of the file-size distribution: by size relative to the small-file threshold `T`,
/// `< T/64`, `< T/16`, `< T/4`, `< T` (small), then `< 2T`, `< 4T`, `≥ 4T`.
pub const SIZE_BUCKETS: usize = 7;

/// Of the buckets, those below the small-file threshold.
pub const SMALL_BUCKETS: usize = 4;

/// The upper edges of the size buckets but the last, as multiples of the small-file threshold.
pub const SIZE_BUCKET_EDGES: [f64; SIZE_BUCKETS - 1] = [1.0 / 64.0, 1.0 / 16.0, 0.25, 1.0, 2.0, 4.0];

/// The bucket of a file of `size_bytes` under the small-file threshold `small_limit` (bytes): the
/// edges are multiples of the threshold, compared as [`PartitionTally::add_file`] tells a small
/// file (`size < limit`), so the small buckets hold exactly the small files.
pub fn size_bucket(size_bytes: u64, small_limit: f64) -> usize {
    let size = size_bytes as f64;
    SIZE_BUCKET_EDGES.iter().position(|&edge| size < small_limit * edge).unwrap_or(SIZE_BUCKETS - 1)
}

impl PartitionTally {
    /// An empty tally of the partition `key` labelled `partition`.
    pub fn new(partition: String, key: PartitionKey) -> Self {
        PartitionTally {
            partition,
            key,
            files: 0,
            small_files: 0,
            bytes: 0,
            small_bytes: 0,
            records: 0,
            oldest_sequence_number: i64::MAX,
            size_buckets: [0; SIZE_BUCKETS],
        }
    }

    /// Counts one data file; `small_limit` is the small-file threshold in bytes.
    pub fn add_file(&mut self, size_bytes: u64, record_count: u64, data_sequence_number: i64, small_limit: f64) {
        self.files += 1;
        self.bytes += size_bytes;
        self.records += record_count;
        if (size_bytes as f64) < small_limit {
            self.small_files += 1;
            self.small_bytes += size_bytes;
        }
        self.size_buckets[size_bucket(size_bytes, small_limit)] += 1;
        self.oldest_sequence_number = self.oldest_sequence_number.min(data_sequence_number);
    }

    /// Adds `other`, the same partition's figures over other files.
    pub fn merge(&mut self, other: &PartitionTally) {
        self.files += other.files;
        self.small_files += other.small_files;
        self.bytes += other.bytes;
        self.small_bytes += other.small_bytes;
        self.records += other.records;
        self.oldest_sequence_number = self.oldest_sequence_number.min(other.oldest_sequence_number);
        for (mine, theirs) in self.size_buckets.iter_mut().zip(other.size_buckets) {
            *mine += theirs;
        }
    }
}

/// What one manifest (or any batch of live files) contributes to a profile: per-partition
/// figures of its data files, its delete files whole, and the data files position deletes name.
/// Holding this instead of every file keeps a profile's memory to the partitions, not the files.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ManifestTally {
    /// One per partition, in the order first seen.
    pub partitions: Vec<PartitionTally>,
    /// Live delete files.
    pub deletes: Vec<DataFile>,
    /// Data files named by a position delete's `referenced_data_file`: location key, partition,
    /// data sequence number.
    pub named: Vec<(PathBuf, PartitionKey, i64)>,
}

impl ManifestTally {
    /// The tally of `files`; `referenced` are the location keys of the data files position
    /// deletes name.
    pub fn from_files(files: &[DataFile], small_limit: f64, referenced: &HashSet<PathBuf>) -> Self {
        let mut out = ManifestTally::default();
        let mut index: HashMap<(&str, &PartitionKey), usize> = HashMap::new();
        for file in files {
            if file.content != FileContent::Data {
                out.deletes.push(file.clone());
                continue;
            }
            let slot = *index.entry((file.partition.as_str(), &file.key)).or_insert_with(|| {
                out.partitions.push(PartitionTally::new(file.partition.clone(), file.key.clone()));
                out.partitions.len() - 1
            });
            out.partitions[slot].add_file(file.size_bytes, file.record_count, file.data_sequence_number, small_limit);
            if !referenced.is_empty() {
                let path = location_key(&file.path);
                if referenced.contains(&path) {
                    out.named.push((path, file.key.clone(), file.data_sequence_number));
                }
            }
        }
        out
    }
}

/// The data files that position deletes among `files` name ([`DataFile::referenced_data_file`]),
/// as [`location_key`]s.
pub fn referenced_paths(files: &[DataFile]) -> HashSet<PathBuf> {
    files.iter().filter_map(|f| f.referenced_data_file.as_deref()).map(location_key).collect()
}
