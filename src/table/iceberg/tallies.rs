//! What the lean reader's per-manifest tallies give the planners: the tallies of a snapshot kept
//! on its table (the gate profiles, then plans twice, on one state; counted and kept by
//! [`super::IcebergTable::data_tallies`]), and the manifests a commit names as they were,
//! undecoded, with their totals taken from them.

use std::sync::Arc;

use iceberg::spec::ManifestFile;

use crate::table::summary::ManifestTally;

/// Each manifest-list entry of a snapshot with its tally, in manifest-list order.
pub type TalliedManifests = Arc<Vec<(ManifestFile, ManifestTally)>>;

/// [`TalliedManifests`] at a small-file threshold.
#[derive(Debug)]
pub struct Tallies {
    /// The small-file threshold in bytes they were counted with.
    pub small_limit: f64,
    /// Each manifest-list entry with its tally.
    pub manifests: TalliedManifests,
}

/// Whether the manifest-list entry `file` gives every file and row count (format v2 and later
/// must; a v1 list may not, and [`crate::table::iceberg::with_counts`] then counts them from the entries).
pub fn has_every_count(file: &ManifestFile) -> bool {
    [file.added_files_count, file.existing_files_count, file.deleted_files_count].iter().all(Option::is_some)
        && [file.added_rows_count, file.existing_rows_count, file.deleted_rows_count].iter().all(Option::is_some)
}

/// A manifest of the current snapshot a new snapshot names as it is, without decoding it: its
/// list entry (with every file and row count) and what its live entries, all data files, add up
/// to (by the lean reader).
#[derive(Debug, Clone)]
pub struct CarriedManifest {
    /// The manifest-list entry.
    pub file: ManifestFile,
    /// Live data files.
    pub files: u64,
    /// Their rows.
    pub records: u64,
    /// Their bytes.
    pub bytes: u64,
}

impl CarriedManifest {
    /// Whether the manifest has a live entry (added or existing): one without is not carried
    /// into a new snapshot, as with a decoded one.
    pub fn has_live_entries(&self) -> bool {
        self.file.added_files_count.unwrap_or(0) + self.file.existing_files_count.unwrap_or(0) > 0
    }
}
