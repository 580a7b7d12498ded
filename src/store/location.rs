//! Locations: what a table, file or directory name means, parsed in one place. A location is a
//! local path (plain, or a `file:` URI as Java and Spark write them) or an object-storage URI
//! (`s3://bucket/key`, with `s3a://` and `s3n://` as Hadoop writes them; Azure's
//! `az://container/key` and its other spellings; Google Cloud Storage's `gs://bucket/key`: each
//! store's schemes are its backend's, [`super::backend`]). Nothing outside `store` looks at a
//! scheme prefix: callers ask [`Location::parse`] (or [`local_path`], and the helpers below,
//! which go through it) whether a location is remote, what its bucket and key are, or which local
//! path it names. Schemes this version cannot serve (`hdfs://`, `oss://`, …) are refused by name.

use std::path::{Path, PathBuf};

use super::backend::ObjectLocation;
use crate::error::Result;

/// A parsed location.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Location {
    /// A local path (a `file:` prefix removed).
    Local(PathBuf),
    /// An object on an object store.
    Object(ObjectLocation),
}

impl Location {
    /// Parses `text`: a path or `file:` URI is local; a scheme of one of the stores
    /// ([`super::stores::STORES`]) is an object; any other `scheme://` is refused, naming the
    /// scheme.
    pub fn parse(text: &str) -> Result<Location> {
        if !is_remote(text) {
            return Ok(Location::Local(PathBuf::from(strip_file_scheme(text))));
        }
        ObjectLocation::parse(text).map(Location::Object)
    }

    /// Whether it is on object storage.
    pub fn is_remote(&self) -> bool {
        matches!(self, Location::Object(_))
    }

    /// The local path it names, `None` for an object.
    pub fn local_path(&self) -> Option<&Path> {
        match self {
            Location::Local(path) => Some(path),
            Location::Object(_) => None,
        }
    }
}

/// The local path `location` names (a `file:` prefix removed), or `None` when it names an object
/// on a store — or has a scheme this version does not serve, refused by name when it is read
/// ([`ObjectLocation::parse`]). What a caller that treats local files and objects apart asks.
pub fn local_path(location: &str) -> Option<&str> {
    (!is_remote(location)).then(|| strip_file_scheme(location))
}

/// Whether `location` is on object storage (`s3://`, `s3a://`, `s3n://`, or another scheme
/// that is not a local file: refused later by [`ObjectLocation::parse`]).
pub(super) fn is_remote(location: &str) -> bool {
    match location.split_once("://") {
        Some((scheme, _)) => !scheme.eq_ignore_ascii_case("file"),
        None => false,
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
pub(super) fn strip_file_scheme(location: &str) -> &str {
    if let Some(rest) = location.strip_prefix("file://") {
        rest
    } else if let Some(rest) = location.strip_prefix("file:") {
        rest
    } else {
        location
    }
}

/// A location written as a URI with a scheme of more than one letter (`file:///a/b`, `file:/a/b`,
/// percent-encoded; a Windows drive letter is no scheme) as a local path, else `None` (a plain
/// path, relative or absolute). A URI that names no local file is kept as it is written.
pub fn uri_to_local_path(location: &str) -> Option<PathBuf> {
    let url = url::Url::parse(location).ok().filter(|u| u.scheme().len() > 1)?;
    Some(url.to_file_path().unwrap_or_else(|_| PathBuf::from(location)))
}

/// A URL a library resolved for a file (delta-kernel's for a deletion vector): a `file:` URL as
/// its local path (percent-decoded), any other as the location it spells.
pub fn url_to_location(url: &url::Url) -> Option<PathBuf> {
    if url.scheme() == "file" { url.to_file_path().ok() } else { Some(PathBuf::from(url.as_str())) }
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
    use crate::error::ErrorKind;
    use crate::store::backend::ObjectScheme;
    use crate::store::stores::canonical;

    #[test]
    fn uris_of_local_files_become_paths_and_plain_paths_stay_none() {
        assert_eq!(uri_to_local_path("file:///w/t/a%20b.parquet"), Some(PathBuf::from("/w/t/a b.parquet")));
        assert_eq!(uri_to_local_path("file:/w/t/a.parquet"), Some(PathBuf::from("/w/t/a.parquet")));
        for plain in ["part-0.parquet", "p=1/part-0.parquet", "/w/t/a.parquet", "C:/w/a.parquet"] {
            assert_eq!(uri_to_local_path(plain), None, "{plain}");
        }
        let url = url::Url::parse("file:///w/t/dv%201.bin").unwrap();
        assert_eq!(url_to_location(&url), Some(PathBuf::from("/w/t/dv 1.bin")));
        let url = url::Url::parse("s3://b/t/dv.bin").unwrap();
        assert_eq!(url_to_location(&url), Some(PathBuf::from("s3://b/t/dv.bin")));
    }

    #[test]
    fn azure_locations_keep_their_spelling() {
        let cases = [
            ("az://lake/t/metadata/v1.metadata.json", "lake", "t/metadata/v1.metadata.json"),
            ("abfss://lake@acct.dfs.core.windows.net/t/x.parquet", "lake@acct.dfs.core.windows.net", "t/x.parquet"),
            ("wasbs://lake@acct.blob.core.windows.net/t", "lake@acct.blob.core.windows.net", "t"),
            ("azure://lake/t", "lake", "t"),
        ];
        for (text, bucket, key) in cases {
            let parsed = ObjectLocation::parse(text).unwrap();
            assert_eq!(parsed.scheme.backend().name(), "Azure", "{text}");
            assert_eq!((parsed.bucket.as_str(), parsed.key.as_str()), (bucket, key));
            assert_eq!(parsed.to_uri(), text, "written back as given");
            assert_eq!(canonical(text), text);
        }
        let refused = ObjectLocation::parse("hdfs://b/k").unwrap_err().message().to_string();
        assert!(
            refused.contains("'hdfs://'") && refused.contains("abfss://") && refused.contains("gs://"),
            "{refused}"
        );
    }

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
            let object = ObjectLocation {
                scheme: ObjectScheme::from_scheme("s3").unwrap(),
                bucket: "b".into(),
                key: "k/x".into(),
            };
            assert_eq!(parsed, Location::Object(object.clone()), "{s3}");
            assert_eq!(object.to_uri(), "s3://b/k/x");
        }
        let gcs =
            ObjectLocation { scheme: ObjectScheme::from_scheme("gs").unwrap(), bucket: "b".into(), key: "k".into() };
        assert_eq!(Location::parse("gs://b/k").unwrap(), Location::Object(gcs));
        for refused in ["oss://b/k", "hdfs://n/k"] {
            let e = Location::parse(refused).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Unsupported, "{refused}");
        }
        assert!(Location::parse("s3:///k").is_err(), "no bucket");
    }

    #[test]
    fn locations_split_into_bucket_and_key() {
        let split_location = |l: &str| ObjectLocation::parse(l).map(|o| (o.bucket, o.key));
        assert_eq!(
            split_location("s3://b/w/t/metadata/v1.metadata.json").unwrap(),
            ("b".into(), "w/t/metadata/v1.metadata.json".into())
        );
        assert_eq!(split_location("s3a://b/k").unwrap(), ("b".into(), "k".into()));
        assert_eq!(canonical("s3a://b/k"), "s3://b/k");
        assert_eq!(split_location("hdfs://b/k").unwrap_err().kind(), ErrorKind::Unsupported);
        assert!(split_location("s3:///k").is_err());
        assert!(is_remote("s3://b/k") && !is_remote("/tmp/x") && !is_remote("file:///tmp/x"));
        assert_eq!(local_path("file:///tmp/x"), Some("/tmp/x"));
        assert_eq!(local_path("/tmp/x"), Some("/tmp/x"));
        assert_eq!(local_path("s3://b/k"), None);
        assert_eq!(local_path("hdfs://n/k"), None, "refused when read, never taken for a path");
    }
}
