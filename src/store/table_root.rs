//! A table's root, and what a maintenance run may read and write relative to it.
//!
//! Whoever writes a table controls its metadata: every path in its manifests and Delta log, its
//! `location`, its properties. The root is what the maintainer named or the catalog registered
//! instead: a Delta table's directory, or for Iceberg the directory holding the metadata file we
//! loaded (its parent's parent for `<root>/metadata/vN.metadata.json`). Against it:
//!
//! - [`TableRoot::check_read`]: a file the metadata names is read only when it is a file of the
//!   table's store — an absolute local path for a local table; the same store and bucket for a
//!   table on object storage, with no glob character (DuckDB's object-store readers would list
//!   and expand it) — so no entry makes the host open another store, or send a request to a URL
//!   of the writer's choosing. Files elsewhere on the same store may be read (Iceberg tables
//!   reference imported files; Delta shallow clones their source's).
//! - [`TableRoot::contains`]: whether a location lies at or under the root, compared by path
//!   components after `..` and `.` are resolved (`/t/a` is not under `/t/ab`); every file a run
//!   writes must.
//!
//! Local paths are taken lexically here; symbolic links are not resolved.

use std::path::{Component, Path, PathBuf};

use super::backend::ObjectLocation;
use super::location::{Location, normalize_location};
use crate::error::{Error, ErrorKind, Result};

/// The root of one table (see the module doc), parsed and normalized once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableRoot {
    root: Root,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Root {
    /// A normalized absolute local path.
    Local(PathBuf),
    /// The store, the bucket and the key's normalized segments (as written; the scheme's
    /// spelling kept for [`TableRoot::location`]).
    Object(ObjectLocation, Vec<String>),
}

impl TableRoot {
    /// The root of a table whose directory is `dir` (a Delta table's, a path table's).
    pub fn of_directory(dir: &str) -> Result<TableRoot> {
        let root = match Location::parse(dir)? {
            Location::Local(path) => {
                let normal = normalize_location(&path.to_string_lossy())
                    .filter(|p| p.is_absolute())
                    .ok_or_else(|| Error::invalid(format!("table directory '{dir}' is not an absolute path")))?;
                Root::Local(normal)
            }
            Location::Object(object) => {
                let segments = key_segments(&object.key)
                    .ok_or_else(|| Error::invalid(format!("table location '{dir}' climbs above its bucket")))?;
                Root::Object(object, segments)
            }
        };
        Ok(TableRoot { root })
    }

    /// The root of an Iceberg table loaded from `metadata_location` (a catalog's pointer, or the
    /// file or directory the user named): the directory holding the metadata file, or its parent
    /// when that directory is the table's `metadata/`.
    pub fn of_metadata_file(metadata_location: &str) -> Result<TableRoot> {
        let no_dir =
            || Error::invalid(format!("metadata file '{metadata_location}' has no directory to be the table's root"));
        let root = match Location::parse(metadata_location)? {
            Location::Local(path) => {
                let file =
                    normalize_location(&path.to_string_lossy()).filter(|p| p.is_absolute()).ok_or_else(no_dir)?;
                let dir = file.parent().ok_or_else(no_dir)?;
                let dir = match dir.file_name() {
                    Some(name) if name == "metadata" => dir.parent().unwrap_or(dir),
                    _ => dir,
                };
                Root::Local(dir.to_path_buf())
            }
            Location::Object(object) => {
                let mut segments = key_segments(&object.key).ok_or_else(no_dir)?;
                segments.pop().ok_or_else(no_dir)?;
                if segments.last().is_some_and(|s| s == "metadata") {
                    segments.pop();
                }
                Root::Object(object, segments)
            }
        };
        Ok(TableRoot { root })
    }

    /// The root as a location of its store (`/w/t`, `s3://bucket/w/t`), without a trailing `/`.
    pub fn location(&self) -> String {
        match &self.root {
            Root::Local(path) => path.to_string_lossy().into_owned(),
            Root::Object(object, segments) => {
                format!("{}://{}/{}", object.scheme.as_str(), object.bucket, segments.join("/"))
                    .trim_end_matches('/')
                    .to_string()
            }
        }
    }

    /// Whether `location` lies at or under the root: same store (and bucket), and the root's
    /// path components a prefix of its components once `..` and `.` are resolved. A location
    /// that does not parse, or whose `..` climb out of its store, is not.
    pub fn contains(&self, location: &str) -> bool {
        match (&self.root, Location::parse(location)) {
            (Root::Local(root), Ok(Location::Local(path))) => {
                normalize_location(&path.to_string_lossy()).is_some_and(|p| p.is_absolute() && p.starts_with(root))
            }
            (Root::Object(root, segments), Ok(Location::Object(object))) => {
                same_bucket(root, &object)
                    && key_segments(&object.key)
                        .is_some_and(|key| key.len() >= segments.len() && key.starts_with(segments))
            }
            _ => false,
        }
    }

    /// Whether new files may be written in the directory `dir` as it is written: under the root
    /// ([`TableRoot::contains`]) and without a `.` or `..` segment.
    pub fn admits_output(&self, dir: &str) -> bool {
        !dir.split('/').any(|s| s == ".." || s == ".") && self.contains(dir)
    }

    /// `location` (the metadata's own, which its writer sets) when it lies under the root, else
    /// the root: where new files of the table go.
    pub fn base(&self, location: &str) -> String {
        let location = location.trim_end_matches('/');
        if self.contains(location) { location.to_string() } else { self.location() }
    }

    /// Refuses `path` (a file the table's metadata names, about to be read) unless it is a file of
    /// the table's store: an absolute local path for a local table (not `~/…`, not relative);
    /// the table's object store and bucket, without a glob character, for a table on object
    /// storage. The message names the file and the root.
    pub fn check_read(&self, path: &str) -> Result<()> {
        let refuse = |why: &str| {
            Error::new(
                ErrorKind::CorruptMetadata,
                format!(
                    "'{path}' is not a file of the table's store ({}): {why}; named by the table's metadata, refused before any \
                     data file was read",
                    self.location()
                ),
            )
        };
        let parsed = Location::parse(path).map_err(|e| refuse(e.message()))?;
        match (&self.root, parsed) {
            (Root::Local(_), Location::Local(local)) => {
                if local.is_absolute() {
                    Ok(())
                } else {
                    Err(refuse("a local file must be named by an absolute path"))
                }
            }
            (Root::Local(_), Location::Object(_)) => Err(refuse("the table is on local disk")),
            (Root::Object(root, _), Location::Object(object)) => {
                if !same_bucket(root, &object) {
                    Err(refuse("it is on another store or bucket"))
                } else if object.key.contains(['*', '?', '[']) {
                    Err(refuse(
                        "a file on object storage with a glob character (*, ?, [) in its name cannot be read literally",
                    ))
                } else {
                    Ok(())
                }
            }
            (Root::Object(..), Location::Local(_)) => {
                Err(refuse("the table is on object storage, this is a local path"))
            }
        }
    }

    /// [`TableRoot::check_read`] of each of `paths`.
    pub fn check_reads<'p>(&self, paths: impl IntoIterator<Item = &'p str>) -> Result<()> {
        paths.into_iter().try_for_each(|p| self.check_read(p))
    }
}

/// `relative` (a path inside a table as its log names it, `/`-separated) lexically normalized,
/// when it stays inside the table: `None` for an absolute path, a URI, or one whose `..` climb
/// out (`../elsewhere/x`, `a/../../x`).
pub fn relative_inside(relative: &Path) -> Option<PathBuf> {
    if relative.to_string_lossy().contains("://") {
        return None;
    }
    let mut out = PathBuf::new();
    for component in relative.components() {
        match component {
            Component::Normal(part) => out.push(part),
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

/// Whether two object locations are on one store and bucket (Azure's spellings compared by
/// container: `lake` and `lake@acct.dfs.core.windows.net` name one).
fn same_bucket(a: &ObjectLocation, b: &ObjectLocation) -> bool {
    a.same_bucket(b)
}

/// An object key's segments with empty and `.` segments dropped and `..` resolved; `None` when
/// `..` climbs above the bucket.
fn key_segments(key: &str) -> Option<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for segment in key.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                out.pop()?;
            }
            s => out.push(s.to_string()),
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_root_of_a_metadata_file_is_the_directory_above_metadata() {
        let cases = [
            ("/w/t/metadata/v3.metadata.json", "/w/t"),
            ("file:///w/t/metadata/00001-a.metadata.json", "/w/t"),
            ("file:/w/t/metadata/v1.metadata.json", "/w/t"),
            ("/w/t/v1.metadata.json", "/w/t"),
            ("/w/t/./metadata/../metadata/v1.metadata.json", "/w/t"),
            ("s3://b/w/t/metadata/v1.metadata.json", "s3://b/w/t"),
            ("s3a://b/w/t/metadata/v1.metadata.json", "s3://b/w/t"),
            ("s3://b/metadata/v1.metadata.json", "s3://b"),
            ("/metadata/v1.metadata.json", "/"),
        ];
        for (metadata, root) in cases {
            assert_eq!(TableRoot::of_metadata_file(metadata).unwrap().location(), root, "{metadata}");
        }
        assert!(TableRoot::of_metadata_file("v1.metadata.json").is_err(), "no directory");
        assert!(TableRoot::of_directory("t/relative").is_err(), "a relative root");
        assert!(TableRoot::of_directory("s3://b/../x").is_err(), "above the bucket");
    }

    #[test]
    fn under_the_root_is_by_components_after_dots_resolve() {
        let local = TableRoot::of_directory("/w/t").unwrap();
        let cases = [
            ("/w/t", true),
            ("/w/t/data/a.parquet", true),
            ("file:///w/t/data/a.parquet", true),
            ("/w/t/./data//a.parquet", true),
            ("/w/t/data/../../t/x", true),
            ("/w/tt/a.parquet", false),
            ("/w/t/../tt/a.parquet", false),
            ("/w/t/../../../../a", false),
            ("/w", false),
            ("w/t/a", false),
            ("s3://w/t/a", false),
        ];
        for (path, want) in cases {
            assert_eq!(local.contains(path), want, "{path} under /w/t");
        }
        let object = TableRoot::of_directory("s3://b/w/t/").unwrap();
        let cases = [
            ("s3://b/w/t/data/a", true),
            ("s3a://b/w/t/data/a", true),
            ("s3://b/w//t/data/a", true),
            ("s3://b/w/t", true),
            ("s3://b/w/tt/a", false),
            ("s3://b/w/t/../u/a", false),
            ("s3://other/w/t/a", false),
            ("gs://b/w/t/a", false),
            ("/w/t/a", false),
        ];
        for (path, want) in cases {
            assert_eq!(object.contains(path), want, "{path} under s3://b/w/t");
        }
        assert!(local.admits_output("/w/t/data/p=1") && local.admits_output("file:///w/t/data"));
        assert!(!local.admits_output("/w/t/data/../../t/data"), "as written, with `..`");
        assert!(!local.admits_output("/w/elsewhere"));
        assert_eq!(local.base("/w/t/"), "/w/t");
        assert_eq!(local.base("file:///w/t/sub"), "file:///w/t/sub");
        assert_eq!(local.base("/w/elsewhere"), "/w/t");
        assert_eq!(object.base("s3://other/w/t"), "s3://b/w/t");
        let azure = TableRoot::of_directory("abfss://lake@acct.dfs.core.windows.net/t").unwrap();
        assert!(azure.contains("az://lake/t/data/x") && !azure.contains("az://other/t/data/x"));
    }

    #[test]
    fn reads_stay_on_the_tables_store() {
        let local = TableRoot::of_directory("/w/t").unwrap();
        for fine in ["/w/t/data/a.parquet", "file:///elsewhere/imported.parquet", "/w/t/data/part-[12].parquet"] {
            assert!(local.check_read(fine).is_ok(), "{fine}");
        }
        for (refused, why) in [
            ("~/secret.parquet", "absolute path"),
            ("data/a.parquet", "absolute path"),
            ("http://internal-host/x.parquet", "'http://' locations are not supported"),
            ("s3://b/w/t/a.parquet", "on local disk"),
        ] {
            let message = local.check_read(refused).unwrap_err().message().to_string();
            assert!(message.contains(&format!("'{refused}'")) && message.contains(why), "{message}");
            assert!(message.contains("(/w/t)"), "{message}");
        }
        let object = TableRoot::of_directory("s3://b/w/t").unwrap();
        assert!(object.check_read("s3://b/w/t/data/a.parquet").is_ok());
        assert!(object.check_read("s3a://b/imported/a.parquet").is_ok(), "elsewhere in the bucket");
        for (refused, why) in [
            ("s3://other/w/t/a.parquet", "another store or bucket"),
            ("gs://b/w/t/a.parquet", "another store or bucket"),
            ("/w/t/a.parquet", "local path"),
            ("s3://b/w/t/part-[12].parquet", "glob character"),
            ("s3://b/w/t/*.parquet", "glob character"),
            ("https://b.s3.amazonaws.com/w/t/a.parquet", "not supported"),
        ] {
            let message = object.check_read(refused).unwrap_err().message().to_string();
            assert!(message.contains(&format!("'{refused}'")) && message.contains(why), "{message}");
        }
        assert!(object.check_reads(["s3://b/w/t/a", "s3://b/w/t/b"]).is_ok());
        assert!(object.check_reads(["s3://b/w/t/a", "http://h/b"]).is_err(), "not only the first");
    }

    #[test]
    fn relative_paths_inside_the_table() {
        let cases = [
            ("part-0.parquet", Some("part-0.parquet")),
            ("p=1/part-0.parquet", Some("p=1/part-0.parquet")),
            ("./p=1/../p=2/x", Some("p=2/x")),
            ("", Some("")),
            ("../elsewhere/x", None),
            ("p=1/../../x", None),
            ("/abs/x", None),
            ("s3://b/x", None),
        ];
        for (relative, want) in cases {
            assert_eq!(relative_inside(Path::new(relative)), want.map(PathBuf::from), "{relative}");
        }
    }
}
