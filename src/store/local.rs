//! What is done to a location only when it is a local file: a file system has directories to
//! create, real paths behind symbolic links, and writes to flush; an object store has none of
//! them (a PUT is durable once it returns), so for an object these do nothing.

use std::path::{Path, PathBuf};

use super::location::local_path;
use crate::error::Result;

/// Flushes each of `locations` that is a local file to disk (`fsync`); objects need nothing.
pub fn sync_local<'a>(locations: impl IntoIterator<Item = &'a str>) -> Result<()> {
    for path in locations.into_iter().filter_map(local_path) {
        std::fs::File::open(path)?.sync_all()?;
    }
    Ok(())
}

/// The real path of `location` (symbolic links resolved) when it is a local file or directory
/// that exists; `None` for an object, or a path that does not resolve.
pub fn local_real_path(location: &str) -> Option<PathBuf> {
    std::fs::canonicalize(local_path(location)?).ok()
}

/// Creates the directory a new local file `location` goes in (and its parents); an object needs
/// none.
pub fn create_parent_dir(location: &str) -> Result<()> {
    if let Some(parent) = local_path(location).and_then(|p| Path::new(p).parent()) {
        std::fs::create_dir_all(parent)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_files_get_directories_flushes_and_real_paths_objects_nothing() {
        let base = std::env::temp_dir().join(format!("lakehouse-local-{}", uuid::Uuid::new_v4()));
        let file = base.join("data/p=1/a.parquet");
        create_parent_dir(&format!("file://{}", file.display())).unwrap();
        assert!(base.join("data/p=1").is_dir());
        std::fs::write(&file, b"x").unwrap();
        sync_local([file.to_str().unwrap(), "s3://b/t/a.parquet"]).unwrap();
        assert_eq!(local_real_path(&format!("file://{}", file.display())), std::fs::canonicalize(&file).ok());
        create_parent_dir("s3://b/t/data/a.parquet").unwrap();
        assert_eq!(local_real_path("s3://b/t"), None);
        assert_eq!(local_real_path(&base.join("missing").to_string_lossy()), None);
        let _ = std::fs::remove_dir_all(&base);
    }
}
