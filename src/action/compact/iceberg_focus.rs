//! Which manifests an Iceberg compaction decodes ([`focus`]): at a million files, only those
//! holding files of partitions that need compaction; the others are carried undecoded and their
//! partitions settled from the lean reader's tallies.

use std::collections::HashSet;

use crate::error::Result;
use crate::profile::{PartitionProfile, Thresholds, profile_tallies};
use crate::table::PartitionKey;
use crate::table::iceberg::{CarriedManifest, IcebergTable, LoadedManifest, has_every_count};
use crate::table::summary::PartitionTally;

/// The current snapshot's manifests as a focused rewrite reads them ([`focus`]).
pub struct Focus {
    /// Decoded, in manifest-list order.
    pub manifests: Vec<LoadedManifest>,
    /// Named by the commit as they are, undecoded.
    pub carried: Vec<CarriedManifest>,
    /// Partitions planned from their tallies alone (none needs compaction).
    pub settled: Vec<PartitionProfile>,
}

impl Focus {
    /// Every manifest decoded: nothing carried, nothing settled.
    pub fn whole(table: &IcebergTable) -> Result<Self> {
        Ok(Focus { manifests: table.load_manifests()?, carried: Vec::new(), settled: Vec::new() })
    }
}

/// The manifests of `table`'s current snapshot, decoded only where a partition that may need
/// compaction has files: every manifest is first tallied by the lean reader (as the profile
/// is), the tallies give each partition's profile under `thresholds`, and a manifest holding
/// none of the partitions that need compaction is carried undecoded — those partitions are
/// settled from their figures. A table of a million files then holds the degraded partitions'
/// files, not every file. Every manifest is decoded (nothing carried or settled) when the table
/// has delete files (a delete applies across manifests, and a rewrite may remove it) or a
/// manifest-list entry lacks its counts (v1: a carried entry must have them).
pub fn focus(table: &IcebergTable, thresholds: &Thresholds) -> Result<Focus> {
    let tallies = match table.data_tallies(thresholds.small_file_threshold_bytes())? {
        Some(tallies) if tallies.iter().all(|(m, _)| has_every_count(m)) => tallies,
        _ => return Focus::whole(table),
    };
    let profiles = profile_tallies(tallies.iter().map(|(_, t)| t), thresholds);
    let (wanted, settled): (Vec<PartitionProfile>, Vec<PartitionProfile>) =
        profiles.into_iter().partition(|p| p.requires_compaction);
    let wanted: HashSet<&PartitionKey> = wanted.iter().map(|p| &p.key).collect();
    let (mut decode, mut carried) = (Vec::new(), Vec::new());
    for (file, tally) in tallies.iter() {
        if tally.partitions.iter().any(|p| wanted.contains(&p.key)) || !tally.deletes.is_empty() {
            decode.push(file.clone());
        } else {
            let sum = |f: fn(&PartitionTally) -> u64| tally.partitions.iter().map(f).sum::<u64>();
            let (files, records, bytes) = (sum(|p| p.files), sum(|p| p.records), sum(|p| p.bytes));
            carried.push(CarriedManifest { file: file.clone(), files, records, bytes });
        }
    }
    Ok(Focus { manifests: table.decode_manifests(decode)?, carried, settled })
}
