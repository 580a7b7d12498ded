//! Where an Iceberg table's current metadata file is: from a metadata file's path, a table
//! directory (its version hint, or with `latest_metadata` the newest metadata file), a table on
//! object storage, or a catalog identifier resolved through [`crate::catalog`]. A Delta table
//! directory is refused by name here; [`super::Table::open`] tries Delta first.

use std::path::{Path, PathBuf};

use super::{delta, not_a_table};
use crate::error::{Error, ErrorKind, Result};
use crate::store::{Location, TableRoot};

/// Options that change how a `table` argument is resolved.
#[derive(Debug, Clone, Default)]
pub struct LocateOptions {
    /// For a table directory without `metadata/version-hint.text`: use the newest metadata file.
    pub latest_metadata: bool,
    /// Overrides for the catalog a catalog identifier is resolved through.
    pub catalog: crate::catalog::CatalogOptions,
}

/// Where a table's current metadata lives, and how it was found.
#[derive(Debug, Clone, PartialEq)]
pub struct Located {
    /// Path (or `file://` URI) of the current `*.metadata.json`.
    pub metadata_location: String,
    /// The catalog entry when the table was named by identifier.
    pub catalog_table: Option<crate::catalog::CatalogTable>,
}

impl Located {
    /// The table's root: the directory of its metadata file ([`TableRoot::of_metadata_file`]).
    pub fn root(&self) -> Result<TableRoot> {
        TableRoot::of_metadata_file(&self.metadata_location)
    }
}

/// Resolves `table` to the location of its current Iceberg metadata file.
pub fn locate(table: &str, options: &LocateOptions) -> Result<Located> {
    locate_at(table, &Location::parse(table.trim())?, options)
}

/// [`locate`] of `table`, parsed as `location`.
pub(super) fn locate_at(table: &str, location: &Location, options: &LocateOptions) -> Result<Located> {
    let table = table.trim();
    if table.is_empty() {
        return Err(Error::invalid("table must not be empty"));
    }
    let path = match location {
        Location::Object(_) => return crate::runtime::block_on(locate_remote(table, options))?,
        Location::Local(path) => path.as_path(),
    };
    if path.is_file() {
        return locate_metadata_file(path);
    }
    if path.is_dir() {
        return locate_table_dir(path, options.latest_metadata);
    }
    if looks_like_path(table) {
        return Err(Error::new(ErrorKind::NotFound, format!("table path '{table}' does not exist")));
    }
    let catalog_table = crate::catalog::resolve(table, &options.catalog)?;
    Ok(Located { metadata_location: catalog_table.metadata_location.clone(), catalog_table: Some(catalog_table) })
}

/// [`locate`] on object storage: a metadata file (`s3://…/metadata/v3.metadata.json`) or a table
/// directory (its `metadata/version-hint.text`, followed past a stale hint, else with
/// `latest_metadata` the newest metadata file). Credentials: the named catalog's `s3.*`
/// properties when `catalog` is given or a default catalog is configured, else the AWS
/// environment ([`crate::store`]).
async fn locate_remote(table: &str, options: &LocateOptions) -> Result<Located> {
    use crate::store;
    let table = table.trim_end_matches('/');
    crate::catalog::register_configured(table.rsplit_once("/metadata/").map_or(table, |(d, _)| d), &options.catalog)?;
    let name = table.rsplit('/').next().unwrap_or_default();
    if name.ends_with(".json") || is_metadata_file_name(name) {
        if !is_metadata_file_name(name) && !name.ends_with(".json") {
            return Err(Error::invalid(format!("'{table}' is not an Iceberg metadata file (*.metadata.json)")));
        }
        if !store::exists(table).await? {
            return Err(Error::new(ErrorKind::NotFound, format!("metadata file '{table}' does not exist")));
        }
        return Ok(Located { metadata_location: table.to_string(), catalog_table: None });
    }
    let metadata_dir = format!("{table}/metadata");
    let hint = format!("{metadata_dir}/version-hint.text");
    let mut chosen = None;
    if store::exists(&hint).await? {
        let text = store::read(&hint).await?;
        let text = String::from_utf8_lossy(&text).trim().to_string();
        if let Ok(version) = text.parse::<u64>() {
            for candidate in [format!("v{version}.metadata.json"), format!("v{version}.gz.metadata.json")] {
                let location = format!("{metadata_dir}/{candidate}");
                if store::exists(&location).await? {
                    chosen = Some(location);
                    break;
                }
            }
        }
    }
    let listing =
        if chosen.is_none() || options.latest_metadata { store::list(&metadata_dir).await? } else { Vec::new() };
    let files: Vec<&store::ObjectInfo> =
        listing.iter().filter(|o| o.location.rsplit('/').next().is_some_and(is_metadata_file_name)).collect();
    if let Some(current) = chosen.clone() {
        // Follow vN+1, vN+2, … past a stale hint, as on disk.
        let names: std::collections::HashSet<&str> = files.iter().map(|o| o.location.as_str()).collect();
        let mut current = current;
        while let Some(v) = hadoop_version(Path::new(&current)) {
            let next = format!("{metadata_dir}/v{}.metadata.json", v + 1);
            if names.contains(next.as_str()) || (names.is_empty() && store::exists(&next).await?) {
                current = next;
            } else {
                break;
            }
        }
        return Ok(Located { metadata_location: current, catalog_table: None });
    }
    if files.is_empty() {
        if let Some(hint) = not_a_table::by_name(table) {
            return Err(hint);
        }
        if listing.is_empty() {
            return Err(Error::new(ErrorKind::NotFound, format!("table path '{table}' does not exist")));
        }
        return Err(Error::new(ErrorKind::NotFound, format!("'{metadata_dir}' has no *.metadata.json files")));
    }
    if !options.latest_metadata {
        return Err(Error::invalid(format!(
            "'{table}' has no metadata/version-hint.text, so the current metadata file is unknown ({} candidates); \
             pass the metadata.json path, a catalog identifier, or latest_metadata := true to use the newest one",
            files.len()
        )));
    }
    let newest = files
        .iter()
        .max_by_key(|o| (o.location.rsplit('/').next().and_then(metadata_version), o.modified_ms))
        .expect("checked non-empty");
    Ok(Located { metadata_location: newest.location.clone(), catalog_table: None })
}

/// `path` made absolute against the working directory (lexically: symlinks are kept), so that
/// every location we write into metadata (the metadata log, new manifests) is absolute, as
/// Iceberg expects, even when the user typed a relative path.
fn absolute(path: &Path) -> String {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()).to_string_lossy().into_owned()
}

fn looks_like_path(table: &str) -> bool {
    table.contains('/')
        || table.contains('\\')
        || table.ends_with(".json")
        || table.ends_with(".gz")
        || table.starts_with('.')
}

fn locate_metadata_file(path: &Path) -> Result<Located> {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    if !name.ends_with(".json") && !is_metadata_file_name(name) {
        return Err(Error::invalid(format!(
            "'{}' is a file but not an Iceberg metadata file (*.metadata.json)",
            path.display()
        )));
    }
    Ok(Located { metadata_location: absolute(path), catalog_table: None })
}

fn locate_table_dir(dir: &Path, latest_metadata: bool) -> Result<Located> {
    if delta::is_delta_dir(dir) {
        return Err(Error::new(
            ErrorKind::Unsupported,
            format!(
                "'{}' is a Delta Lake table; this function works on Iceberg tables (on Delta, lakehouse_vacuum \
                 retires history and removes unreferenced files)",
                dir.display()
            ),
        ));
    }
    let metadata_dir = dir.join("metadata");
    if !metadata_dir.is_dir() {
        return Err(not_a_table::not_a_table(dir));
    }
    let hint = metadata_dir.join("version-hint.text");
    let chosen = if hint.is_file() {
        follow_versions(metadata_file_from_hint(&metadata_dir, &std::fs::read_to_string(&hint)?)?)
    } else {
        let candidates = metadata_files(&metadata_dir)?;
        if candidates.is_empty() {
            return Err(Error::new(
                ErrorKind::NotFound,
                format!("'{}' has no *.metadata.json files", metadata_dir.display()),
            ));
        }
        if !latest_metadata {
            return Err(Error::invalid(format!(
                "'{}' has no metadata/version-hint.text, so the current metadata file is unknown \
                 ({} candidates); pass the metadata.json path, a catalog identifier, or \
                 latest_metadata := true to use the newest one",
                dir.display(),
                candidates.len()
            )));
        }
        newest_metadata_file(candidates)
    };
    Ok(Located { metadata_location: absolute(&chosen), catalog_table: None })
}

/// From a Hadoop-style `vN.metadata.json`, the last of `v{N+1}`, `v{N+2}`, … that exists: a
/// commit creates the next version first and moves the hint after, so a hint may lag (Java's
/// `HadoopTableOperations` reads the same way).
fn follow_versions(mut chosen: PathBuf) -> PathBuf {
    while let Some(v) = hadoop_version(&chosen) {
        let next = [format!("v{}.metadata.json", v + 1), format!("v{}.gz.metadata.json", v + 1)]
            .into_iter()
            .map(|n| chosen.with_file_name(n))
            .find(|p| p.is_file());
        match next {
            Some(next) => chosen = next,
            None => break,
        }
    }
    chosen
}

/// The version of a Hadoop-style `vN.metadata.json` (or `vN.gz.metadata.json`) name.
pub fn hadoop_version(path: &Path) -> Option<u64> {
    let name = path.file_name()?.to_str()?;
    name.starts_with('v').then(|| metadata_version(name)).flatten()
}

/// Whether a file name is an Iceberg metadata file: `*.metadata.json`, or gzip-compressed
/// `*.gz.metadata.json` / `*.metadata.json.gz`.
pub fn is_metadata_file_name(name: &str) -> bool {
    name.ends_with(".metadata.json") || name.ends_with(".metadata.json.gz")
}

fn metadata_files(metadata_dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(metadata_dir)? {
        let path = entry?.path();
        if path.file_name().and_then(|n| n.to_str()).is_some_and(is_metadata_file_name) {
            out.push(path);
        }
    }
    Ok(out)
}

/// The version a metadata file name carries: `v12.metadata.json` → 12, `00012-<uuid>.metadata.json` → 12.
pub fn metadata_version(file_name: &str) -> Option<u64> {
    let stem = file_name.strip_prefix('v').unwrap_or(file_name);
    let digits: String = stem.chars().take_while(|c| c.is_ascii_digit()).collect();
    let rest = &stem[digits.len()..];
    if digits.is_empty() || !(rest.starts_with('.') || rest.starts_with('-')) {
        return None;
    }
    digits.parse().ok()
}

fn newest_metadata_file(candidates: Vec<PathBuf>) -> PathBuf {
    let key = |p: &PathBuf| {
        let version = p.file_name().and_then(|n| n.to_str()).and_then(metadata_version);
        let mtime = p.metadata().and_then(|m| m.modified()).ok();
        (version, mtime)
    };
    candidates.into_iter().max_by_key(key).expect("caller checked non-empty")
}

pub(crate) fn metadata_file_from_hint(metadata_dir: &Path, hint: &str) -> Result<PathBuf> {
    let hint = hint.trim();
    if hint.ends_with(".metadata.json") {
        let path = metadata_dir.join(hint.rsplit('/').next().unwrap_or(hint));
        if path.is_file() {
            return Ok(path);
        }
    } else if let Ok(version) = hint.parse::<u64>() {
        for name in [
            format!("v{version}.metadata.json"),
            format!("v{version}.gz.metadata.json"),
            format!("v{version}.metadata.json.gz"),
        ] {
            let path = metadata_dir.join(name);
            if path.is_file() {
                return Ok(path);
            }
        }
        let prefix = format!("{version:05}-");
        for path in metadata_files(metadata_dir)? {
            if path.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(&prefix)) {
                return Ok(path);
            }
        }
    }
    Err(Error::new(
        ErrorKind::CorruptMetadata,
        format!("metadata/version-hint.text points to '{hint}', but no such metadata file exists"),
    )
    .with_context("directory", metadata_dir.display().to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_versions_from_file_names() {
        let cases = [
            ("v12.metadata.json", Some(12)),
            ("00012-0f1e2d.metadata.json", Some(12)),
            ("v3.gz.metadata.json", Some(3)),
            ("metadata.json", None),
            ("vx.metadata.json", None),
        ];
        for (name, want) in cases {
            assert_eq!(metadata_version(name), want, "{name}");
        }
    }

    #[test]
    fn directory_without_hint_is_refused_unless_latest_requested() {
        let dir = std::env::temp_dir().join(format!("lakehouse-locate-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(dir.join("metadata")).unwrap();
        std::fs::write(dir.join("metadata/00000-a.metadata.json"), "{}").unwrap();
        std::fs::write(dir.join("metadata/00001-b.metadata.json"), "{}").unwrap();
        let err = locate(dir.to_str().unwrap(), &LocateOptions::default()).unwrap_err();
        assert!(err.to_string().contains("latest_metadata := true"), "{err}");
        let opts = LocateOptions { latest_metadata: true, ..Default::default() };
        let located = locate(dir.to_str().unwrap(), &opts).unwrap();
        assert!(located.metadata_location.ends_with("00001-b.metadata.json"));
        std::fs::write(dir.join("metadata/version-hint.text"), "0").unwrap();
        let located = locate(dir.to_str().unwrap(), &LocateOptions::default()).unwrap();
        assert!(located.metadata_location.ends_with("00000-a.metadata.json"));
        // Relative paths are recorded as absolute ones.
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(
            absolute(Path::new("t/metadata/v1.metadata.json")),
            cwd.join("t/metadata/v1.metadata.json").to_string_lossy()
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn missing_path_is_not_found() {
        let err = locate("/no/such/table", &LocateOptions::default()).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NotFound);
    }
}
