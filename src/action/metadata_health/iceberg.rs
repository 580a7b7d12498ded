//! An Iceberg table's metadata health: snapshots, manifests, metadata files, delete files and
//! orphans.

use std::collections::HashSet;
use std::path::PathBuf;

use super::figures::{HealthOptions, MetadataHealth};
use crate::action::expire_snapshots::{retention_days_in_force, select};
use crate::action::remove_orphan_files::find_orphans;
use crate::error::Result;
use crate::profile::MIB;
use crate::report::trim_number;
use crate::store::location_key;
use crate::table::iceberg::IcebergTable;
use crate::table::iceberg::reach::Reach;
use crate::table::{self, FileContent, TableFormat};

/// A manifest is small below this share of `commit.manifest.target-size-bytes` (the same
/// half-of-target rule as data files: 64 MiB of 128 MiB).
const SMALL_MANIFEST_SHARE: f64 = 0.5;
const DEFAULT_MANIFEST_TARGET_BYTES: u64 = 8 * 1024 * 1024;

/// Measures `table`'s metadata.
pub fn measure(table: &IcebergTable, options: &HealthOptions) -> Result<MetadataHealth> {
    let metadata = table.metadata.as_ref();
    let now_ms = chrono::Utc::now().timestamp_millis();
    let mut h = MetadataHealth {
        snapshots: metadata.snapshots().len() as u64,
        refs: refs_count(metadata),
        metadata_log_entries: metadata.metadata_log().len() as u64,
        ..Default::default()
    };
    h.oldest_snapshot_ms = metadata.snapshots().map(|s| s.timestamp_ms()).min();
    h.newest_snapshot_ms = metadata.snapshots().map(|s| s.timestamp_ms()).max();
    h.retention_days = retention_days_in_force(metadata, &options.expiry);
    let cutoff_ms = now_ms - (h.retention_days * 86_400_000.0) as i64;
    h.snapshots_past_retention = metadata.snapshots().filter(|s| s.timestamp_ms() < cutoff_ms).count() as u64;
    h.expirable_snapshots = select(table, &options.expiry)?.expired.len() as u64;

    let ids: Vec<i64> = metadata.snapshots().map(|s| s.snapshot_id()).collect();
    let reach = Reach::load(table, &ids, true)?;
    h.missing_metadata_files = reach.missing.len() as u64;
    count_manifests(&mut h, metadata, &reach);
    count_metadata_files(&mut h, table);
    let mut orphans_unknown = None;
    if reach.missing.is_empty() {
        match find_orphans(table, &reach, options.older_than_days) {
            Ok(orphans) => {
                h.orphan_files = Some(orphans.len() as u64);
                h.orphan_bytes = Some(orphans.iter().map(|o| o.size_bytes).sum());
            }
            // Orphans that cannot be told apart are not counted; the figures stay NULL.
            Err(e) if e.kind() == crate::error::ErrorKind::Unsupported => orphans_unknown = Some(e.to_string()),
            Err(e) => return Err(e),
        }
    }

    explain(&mut h, options.older_than_days, orphans_unknown);
    Ok(h)
}

/// The manifests of the current snapshot (how many, their bytes, the small ones) and the live
/// files they list, by content.
fn count_manifests(h: &mut MetadataHealth, metadata: &iceberg::spec::TableMetadata, reach: &Reach) {
    let target = metadata
        .properties()
        .get("commit.manifest.target-size-bytes")
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(DEFAULT_MANIFEST_TARGET_BYTES);
    let small_below = target as f64 * SMALL_MANIFEST_SHARE;
    let current: Vec<&str> =
        metadata.current_snapshot_id().map(|id| reach.manifests_of(id).collect()).unwrap_or_default();
    for path in current {
        let Some(m) = reach.manifests.get(path) else { continue };
        h.manifests += 1;
        h.manifest_bytes += m.length_bytes;
        if (m.length_bytes as f64) < small_below {
            h.small_manifests += 1;
        }
        for f in &m.live {
            match f.content {
                FileContent::Data => h.data_files += 1,
                FileContent::PositionDeletes => h.position_delete_files += 1,
                FileContent::EqualityDeletes => h.equality_delete_files += 1,
            }
        }
    }
}

/// The metadata files in the metadata directory (listed on object storage, read locally), their
/// bytes, and those no longer in the metadata log.
fn count_metadata_files(h: &mut MetadataHealth, table: &IcebergTable) {
    let metadata = table.metadata.as_ref();
    let local_metadata = crate::store::local_path(&table.metadata_location);
    let metadata_dir = |location: &str| location.rsplit_once('/').map(|(d, _)| d.to_string());
    let logged: HashSet<PathBuf> = metadata
        .metadata_log()
        .iter()
        .map(|m| location_key(&m.metadata_file))
        .chain([location_key(&table.metadata_location)])
        .collect();
    if local_metadata.is_none() {
        let logged: HashSet<String> = metadata
            .metadata_log()
            .iter()
            .map(|m| crate::store::canonical(&m.metadata_file))
            .chain([crate::store::canonical(&table.metadata_location)])
            .collect();
        let listed = metadata_dir(&table.metadata_location).map(|d| crate::runtime::block_on(crate::store::list(&d)));
        for o in listed.and_then(|r| r.ok()).and_then(|r| r.ok()).unwrap_or_default() {
            if table::is_metadata_file_name(o.location.rsplit('/').next().unwrap_or_default()) {
                h.metadata_files += 1;
                h.metadata_bytes += o.size_bytes;
                if !logged.contains(&o.location) {
                    h.unlogged_metadata_files += 1;
                }
            }
        }
    } else if let Some(entries) = local_metadata.and_then(metadata_dir).and_then(|d| std::fs::read_dir(d).ok()) {
        for entry in entries.flatten() {
            if table::is_metadata_file_name(&entry.file_name().to_string_lossy()) {
                h.metadata_files += 1;
                h.metadata_bytes += entry.metadata().map_or(0, |m| m.len());
                if !logged.contains(&location_key(&entry.path().to_string_lossy())) {
                    h.unlogged_metadata_files += 1;
                }
            }
        }
    }
}

/// Why an Iceberg table's metadata is bloated (or not measured whole), in `h.reasons`; also its
/// format.
fn explain(h: &mut MetadataHealth, older_than_days: f64, orphans_unknown: Option<String>) {
    if h.requires_expiry() {
        h.reasons.push(format!(
            "{} of {} snapshots past the {}-day retention can be expired",
            h.expirable_snapshots,
            h.snapshots,
            trim_number(h.retention_days)
        ));
    }
    if h.requires_orphan_cleanup() {
        h.reasons.push(format!(
            "{} orphan files ({:.2} MiB) older than {} days",
            h.orphan_files.unwrap_or(0),
            h.orphan_bytes.unwrap_or(0) as f64 / MIB,
            trim_number(older_than_days)
        ));
    }
    if h.unlogged_metadata_files > 0 {
        h.reasons.push(format!(
            "{} metadata files are no longer in the metadata log (kept: write.metadata.delete-after-commit.enabled \
             is not true; orphan removal deletes them)",
            h.unlogged_metadata_files
        ));
    }
    h.format = Some(TableFormat::Iceberg);
    if let Some(why) = orphans_unknown {
        h.reasons.push(format!("orphan files were not counted: {why}"));
    }
    if h.missing_metadata_files > 0 {
        h.reasons.push(format!(
            "{} referenced manifest lists or manifests are missing; orphan files were not counted",
            h.missing_metadata_files
        ));
    }
}

/// Branches and tags (iceberg-rust keeps `refs` private; its serialized form has them).
fn refs_count(metadata: &iceberg::spec::TableMetadata) -> u64 {
    serde_json::to_value(metadata)
        .ok()
        .and_then(|v| v.get("refs").and_then(|r| r.as_object()).map(|r| r.len() as u64))
        .unwrap_or(0)
}
