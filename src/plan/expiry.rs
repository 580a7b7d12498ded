//! Which files an expiry may delete: those reachable only from expired snapshots (pure).
//!
//! A file may be deleted when no retained snapshot reads it: manifest lists of expired
//! snapshots; manifests no retained snapshot lists; data and delete files live (ADDED or
//! EXISTING) in a manifest being deleted and live in no manifest a retained snapshot lists.
//! Reachability is computed from ALL retained snapshots (every branch, tag and unreferenced
//! snapshot that stays), so time travel to any of them keeps working. Anything outside the
//! table's location is reported and never deleted.

use std::collections::HashSet;
use std::path::PathBuf;

use crate::error::{Error, ErrorKind, Result};
use crate::store::{is_inside, location_key};
use crate::table::FileContent;
use crate::table::iceberg::reach::Reach;

/// What kind of file a deletion removes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FileKind {
    /// A snapshot's manifest list.
    ManifestList,
    /// A data or delete manifest.
    Manifest,
    /// A Parquet data file.
    DataFile,
    /// A position or equality delete file.
    DeleteFile,
    /// A statistics (Puffin) or partition statistics file of an expired snapshot.
    StatisticsFile,
    /// A `*.metadata.json` that fell out of the metadata log.
    MetadataFile,
    /// A file under the table location that nothing references.
    OrphanFile,
}

impl FileKind {
    /// The name shown in result rows.
    pub fn as_str(self) -> &'static str {
        match self {
            FileKind::ManifestList => "manifest_list",
            FileKind::Manifest => "manifest",
            FileKind::DataFile => "data_file",
            FileKind::DeleteFile => "delete_file",
            FileKind::StatisticsFile => "statistics_file",
            FileKind::MetadataFile => "metadata_file",
            FileKind::OrphanFile => "orphan_file",
        }
    }
}

/// One file an expiry removes (or, outside the table location, reports).
#[derive(Debug, Clone, PartialEq)]
pub struct Deletion {
    /// What it is.
    pub kind: FileKind,
    /// Location as written in metadata.
    pub path: String,
    /// Size when metadata records it.
    pub size_bytes: Option<u64>,
    /// The expired snapshot it belonged to, for manifest lists and statistics files.
    pub snapshot_id: Option<i64>,
    /// Whether it lies inside the table location (only then is it deleted).
    pub inside_location: bool,
}

/// The files reachable from `expired` snapshots and from no `retained` one, in a stable order
/// (kind, then path). `expired` needs its manifests that no retained snapshot lists decoded;
/// `retained` needs all of its manifests decoded whenever those hold live files (refused
/// otherwise: an undecoded retained manifest could name a file still needed).
pub fn unreachable_files(expired: &Reach, retained: &Reach, location: &str) -> Result<Vec<Deletion>> {
    let deletion = |kind, path: &str, size_bytes, snapshot_id| Deletion {
        kind,
        path: path.to_string(),
        size_bytes,
        snapshot_id,
        inside_location: is_inside(path, location),
    };
    // Compared as normalized local paths, so `file:///t/a` and `/t/a` are one file.
    let key = location_key;
    let mut out = Vec::new();
    let retained_lists: HashSet<PathBuf> = retained.manifest_lists.values().map(|p| key(p)).collect();
    for (id, list) in &expired.manifest_lists {
        if !retained_lists.contains(&key(list)) {
            out.push(deletion(FileKind::ManifestList, list, None, Some(*id)));
        }
    }
    let kept_manifests: HashSet<PathBuf> = retained.manifest_paths().into_iter().map(key).collect();
    let kept_files: HashSet<PathBuf> = retained.live_files().into_keys().map(key).collect();
    let retained_complete = retained.fully_decoded();
    let mut seen: HashSet<PathBuf> = HashSet::new();
    for path in expired.manifest_paths() {
        if kept_manifests.contains(&key(path)) {
            continue;
        }
        if retained.partial {
            return Err(Error::new(
                ErrorKind::CorruptMetadata,
                format!("cannot tell whether retained snapshots list '{path}': their manifest lists were not all read"),
            ));
        }
        let manifest = expired.manifests.get(path);
        out.push(deletion(FileKind::Manifest, path, manifest.map(|m| m.length_bytes), None));
        for file in manifest.map(|m| m.live.as_slice()).unwrap_or_default() {
            if !retained_complete {
                return Err(Error::new(
                    ErrorKind::CorruptMetadata,
                    "cannot tell which files retained snapshots need: their manifests were not all read",
                ));
            }
            let file_key = key(&file.path);
            if kept_files.contains(&file_key) || !seen.insert(file_key) {
                continue;
            }
            let kind = if file.content == FileContent::Data { FileKind::DataFile } else { FileKind::DeleteFile };
            out.push(deletion(kind, &file.path, Some(file.size_bytes), None));
        }
    }
    out.sort_by(|a, b| (a.kind, &a.path).cmp(&(b.kind, &b.path)));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::iceberg::manifest_reader::FileRef;
    use crate::table::iceberg::reach::ManifestFiles;

    fn data(path: &str) -> FileRef {
        FileRef { path: path.into(), size_bytes: 10, content: FileContent::Data }
    }

    /// Snapshots `(id, list, manifests)` over manifests `(path, live files, deleted files)`.
    fn reach(snapshots: &[(i64, &str, &[&str])], manifests: &[(&str, &[&str], &[&str])]) -> Reach {
        let mut r = Reach::default();
        for (id, list, ms) in snapshots {
            r.add_snapshot(*id, list, ms);
        }
        for (path, live, deleted) in manifests {
            let files = ManifestFiles {
                length_bytes: 5,
                deletes: false,
                live: live.iter().map(|p| data(p)).collect(),
                deleted: deleted.iter().map(|p| p.to_string()).collect(),
            };
            r.manifests.insert(path.to_string(), files);
        }
        r
    }

    fn paths(plan: &[Deletion]) -> Vec<(&'static str, &str)> {
        plan.iter().map(|d| (d.kind.as_str(), d.path.as_str())).collect()
    }

    #[test]
    fn only_files_no_retained_snapshot_reads_are_deleted() {
        // s1 appends a (m1); s2 appends b (m1, m2); s3 compacts a+b into c: m3 has a, b DELETED
        // and c ADDED. Expiring s1 and s2 frees their lists, m1, m2, a and b — not c.
        let m1: &[&str] = &["/t/data/a"];
        let m2: &[&str] = &["/t/data/b"];
        let expired = reach(
            &[
                (1, "/t/metadata/snap-1.avro", &["/t/metadata/m1.avro"]),
                (2, "/t/metadata/snap-2.avro", &["/t/metadata/m1.avro", "/t/metadata/m2.avro"]),
            ],
            &[("/t/metadata/m1.avro", m1, &[]), ("/t/metadata/m2.avro", m2, &[])],
        );
        let retained = reach(
            &[(3, "/t/metadata/snap-3.avro", &["/t/metadata/m3.avro"])],
            &[("/t/metadata/m3.avro", &["/t/data/c"], &["/t/data/a", "/t/data/b"])],
        );
        let plan = unreachable_files(&expired, &retained, "/t").unwrap();
        assert_eq!(
            paths(&plan),
            vec![
                ("manifest_list", "/t/metadata/snap-1.avro"),
                ("manifest_list", "/t/metadata/snap-2.avro"),
                ("manifest", "/t/metadata/m1.avro"),
                ("manifest", "/t/metadata/m2.avro"),
                ("data_file", "/t/data/a"),
                ("data_file", "/t/data/b"),
            ]
        );
        assert!(plan.iter().all(|d| d.inside_location));
    }

    #[test]
    fn shared_manifests_and_files_still_live_are_kept() {
        // s2 is retained and still lists m1 (carried over) and has b EXISTING in a rewritten m2'.
        let expired = reach(
            &[(1, "/t/metadata/snap-1.avro", &["/t/metadata/m1.avro", "/t/metadata/m2.avro"])],
            &[("/t/metadata/m1.avro", &["/t/data/a"], &[]), ("/t/metadata/m2.avro", &["/t/data/b", "/t/data/x"], &[])],
        );
        // The retained snapshot names the same files through another spelling of the location.
        let retained = reach(
            &[(2, "/t/metadata/snap-2.avro", &["file:///t/metadata/m1.avro", "/t/metadata/m2b.avro"])],
            &[
                ("file:///t/metadata/m1.avro", &["/t/data/a"], &[]),
                ("/t/metadata/m2b.avro", &["file:///t/data/b"], &["/t/data/x"]),
            ],
        );
        let plan = unreachable_files(&expired, &retained, "/t").unwrap();
        assert_eq!(
            paths(&plan),
            vec![
                ("manifest_list", "/t/metadata/snap-1.avro"),
                ("manifest", "/t/metadata/m2.avro"),
                ("data_file", "/t/data/x"),
            ]
        );
    }

    #[test]
    fn undecoded_retained_manifests_refuse_file_deletion() {
        let expired = reach(
            &[(1, "/t/metadata/snap-1.avro", &["/t/metadata/m1.avro"])],
            &[("/t/metadata/m1.avro", &["/t/data/a"], &[])],
        );
        let mut retained = Reach::default();
        retained.add_snapshot(2, "/t/metadata/snap-2.avro", &["/t/metadata/m2.avro"]);
        assert!(unreachable_files(&expired, &retained, "/t").is_err());
        // With nothing live in the freed manifests, the retained manifests need not be read.
        let empty =
            reach(&[(1, "/t/metadata/snap-1.avro", &["/t/metadata/m1.avro"])], &[("/t/metadata/m1.avro", &[], &[])]);
        assert_eq!(unreachable_files(&empty, &retained, "/t").unwrap().len(), 2);
        // A retained side read only until it covered the expired manifests frees no manifest.
        let mut partial = reach(&[(2, "/t/metadata/snap-2.avro", &["/t/metadata/m1.avro"])], &[]);
        partial.partial = true;
        let freed = unreachable_files(&expired, &partial, "/t").unwrap();
        assert_eq!(paths(&freed), vec![("manifest_list", "/t/metadata/snap-1.avro")]);
        partial.add_snapshot(3, "/t/metadata/snap-3.avro", &[]);
        partial.partial = true;
        let other = reach(&[(1, "/t/metadata/snap-1.avro", &["/t/metadata/m9.avro"])], &[]);
        assert!(unreachable_files(&other, &partial, "/t").is_err());
    }

    #[test]
    fn files_outside_the_location_are_marked() {
        let expired = reach(
            &[(1, "/t/metadata/snap-1.avro", &["/t/metadata/m1.avro"])],
            &[("/t/metadata/m1.avro", &["/elsewhere/a", "/t/../u/b", "/t/data/c"], &[])],
        );
        let plan = unreachable_files(&expired, &Reach::default(), "file:///t").unwrap();
        let outside: Vec<&str> = plan.iter().filter(|d| !d.inside_location).map(|d| d.path.as_str()).collect();
        assert_eq!(outside, vec!["/elsewhere/a", "/t/../u/b"]);
    }
}
