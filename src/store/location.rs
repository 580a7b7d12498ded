//! Locations: what a table, file or directory name means, parsed in one place. A location is a
//! local path (plain, or a `file:` URI as Java and Spark write them) or an object-storage URI
//! (`s3://bucket/key`, with `s3a://` and `s3n://` as Hadoop writes them). Nothing outside this
//! module looks at a scheme prefix: callers ask [`Location::parse`] (or the helpers below, which
//! go through it) whether a location is remote, what its bucket and key are, or which local path
//! it names. Schemes this version cannot serve (`gs://`, `abfss://`, …) are refused by name.

use std::path::{Path, PathBuf};

use crate::error::{Error, ErrorKind, Result};

/// A parsed location.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Location {
    /// A local path (a `file:` prefix removed).
    Local(PathBuf),
    /// An object in an S3 bucket (`s3`, `s3a` and `s3n` are one store).
    S3 {
        /// The bucket.
        bucket: String,
        /// The key (no leading `/`; empty for the bucket itself).
        key: String,
    },
}

impl Location {
    /// Parses `text`: a path or `file:` URI is local; `s3://`, `s3a://`, `s3n://` are S3; any
    /// other `scheme://` is refused, naming the scheme.
    pub fn parse(text: &str) -> Result<Location> {
        if !is_remote(text) {
            return Ok(Location::Local(PathBuf::from(strip_file_scheme(text))));
        }
        let (bucket, key) = split_location(text)?;
        Ok(Location::S3 { bucket, key })
    }

    /// Whether it is on object storage.
    pub fn is_remote(&self) -> bool {
        matches!(self, Location::S3 { .. })
    }

    /// The local path, for a local location.
    pub fn local_path(&self) -> Option<&Path> {
        match self {
            Location::Local(path) => Some(path),
            Location::S3 { .. } => None,
        }
    }

    /// The location as text: the local path, or `s3://bucket/key`.
    pub fn to_uri(&self) -> String {
        match self {
            Location::Local(path) => path.to_string_lossy().into_owned(),
            Location::S3 { bucket, key } => format!("s3://{bucket}/{key}"),
        }
    }
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_uri())
    }
}

/// Whether `location` is on object storage (`s3://`, `s3a://`, `s3n://`, or another scheme
/// that is not a local file: refused later by [`split_location`]).
pub fn is_remote(location: &str) -> bool {
    match location.split_once("://") {
        Some((scheme, _)) => !scheme.eq_ignore_ascii_case("file"),
        None => false,
    }
}

/// The bucket and key of an `s3://bucket/key` location (`s3a://` and `s3n://`, as Hadoop writes
/// them, are the same store). Other schemes are refused by name.
pub fn split_location(location: &str) -> Result<(String, String)> {
    let (scheme, rest) = location
        .split_once("://")
        .ok_or_else(|| Error::invalid(format!("'{location}' is not an object storage location")))?;
    if !matches!(scheme.to_ascii_lowercase().as_str(), "s3" | "s3a" | "s3n") {
        return Err(Error::new(
            ErrorKind::Unsupported,
            format!("'{scheme}://' locations are not supported; this version reads local files and S3 (s3://)"),
        ));
    }
    let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.is_empty() {
        return Err(Error::invalid(format!("'{location}' names no bucket")));
    }
    Ok((bucket.to_string(), key.trim_start_matches('/').to_string()))
}

/// `location` as `s3://bucket/key`, whatever S3 scheme it was written with.
pub fn canonical(location: &str) -> String {
    match split_location(location) {
        Ok((bucket, key)) => format!("s3://{bucket}/{key}"),
        Err(_) => location.to_string(),
    }
}

/// `location` percent-decoded: a key written through one client's encoding (object_store's
/// `Path::from` writes `%` as `%25`) and named decoded in metadata (Delta logs hold decoded
/// paths) compare equal in this form. Listings that decide what is unreferenced match on it as
/// well as on the raw key, so such a file is never taken for an orphan.
pub fn decoded(location: &str) -> String {
    percent_encoding::percent_decode_str(location).decode_utf8_lossy().into_owned()
}

/// `file:///a/b` → `/a/b`; anything else unchanged.
pub fn strip_file_scheme(location: &str) -> &str {
    if let Some(rest) = location.strip_prefix("file://") {
        rest
    } else if let Some(rest) = location.strip_prefix("file:") {
        rest
    } else {
        location
    }
}

/// A location (path or `file://` URI) as a local path, lexically normalized: `.` and repeated
/// separators dropped, `..` resolved against its parent. `None` when `..` climbs above the root
/// or the start of a relative path (such a location is never trusted for deletion).
pub fn normalize_location(location: &str) -> Option<PathBuf> {
    use std::path::Component;
    let mut out = PathBuf::new();
    for component in Path::new(strip_file_scheme(location)).components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() || out.as_os_str().is_empty() {
                    return None;
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    Some(out)
}

/// The key two spellings of one file share (`file:///t/a` and `/t/a`): its normalized path, or
/// for a path that does not normalize, its text (such a path is never inside a location).
pub fn location_key(path: &str) -> PathBuf {
    normalize_location(path).unwrap_or_else(|| PathBuf::from(path))
}

/// Whether `path` lies strictly inside the directory `location` (both locations as written in
/// metadata; compared after [`normalize_location`]). Maintenance deletes nothing that is not.
pub fn is_inside(path: &str, location: &str) -> bool {
    match (normalize_location(path), normalize_location(location)) {
        (Some(p), Some(root)) => !root.as_os_str().is_empty() && p != root && p.starts_with(&root),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_scheme_is_stripped() {
        assert_eq!(strip_file_scheme("file:///tmp/t"), "/tmp/t");
        assert_eq!(strip_file_scheme("file:/tmp/t"), "/tmp/t");
        assert_eq!(strip_file_scheme("/tmp/t"), "/tmp/t");
    }

    #[test]
    fn inside_location_is_lexical_and_strict() {
        let cases = [
            ("file:///w/t/data/a.parquet", "file:///w/t", true),
            ("/w/t/data/a.parquet", "file:///w/t/", true),
            ("/w/t/./data//a.parquet", "/w/t", true),
            ("/w/t/../u/a.parquet", "/w/t", false),
            ("/w/tt/a.parquet", "/w/t", false),
            ("/w/t", "/w/t", false),
            ("/elsewhere/a.parquet", "/w/t", false),
            ("/w/t/../../../../a", "/w/t", false),
        ];
        for (path, location, want) in cases {
            assert_eq!(is_inside(path, location), want, "{path} in {location}");
        }
    }

    #[test]
    fn locations_parse_once_and_name_their_store() {
        assert_eq!(Location::parse("/t/a").unwrap(), Location::Local("/t/a".into()));
        assert_eq!(Location::parse("file:///t/a").unwrap(), Location::Local("/t/a".into()));
        for s3 in ["s3://b/k/x", "s3a://b/k/x", "S3N://b//k/x"] {
            let parsed = Location::parse(s3).unwrap();
            assert_eq!(parsed, Location::S3 { bucket: "b".into(), key: "k/x".into() }, "{s3}");
            assert_eq!(parsed.to_uri(), "s3://b/k/x");
        }
        for refused in ["gs://b/k", "abfss://c@a.dfs.core.windows.net/k"] {
            let e = Location::parse(refused).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Unsupported, "{refused}");
        }
        assert!(Location::parse("s3:///k").is_err(), "no bucket");
    }
}
