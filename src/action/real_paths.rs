//! Real paths of local files (symlinks and `..` resolved), for the listings that decide what is
//! unreferenced: a table named through a symlink, or a log or manifest naming its files by
//! another spelling of the same directory, must not make a live file look untracked.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Resolves paths to their real form, each directory once.
#[derive(Default)]
pub struct RealPaths {
    dirs: HashMap<PathBuf, Option<PathBuf>>,
}

impl RealPaths {
    /// `path` with its directory's symlinks resolved (`None` when the directory does not exist).
    pub fn of(&mut self, path: &Path) -> Option<PathBuf> {
        let (dir, name) = (path.parent()?, path.file_name()?);
        let real = self.dirs.entry(dir.to_path_buf()).or_insert_with(|| std::fs::canonicalize(dir).ok());
        real.as_ref().map(|d| d.join(name))
    }
}

/// `path` with its directory's symlinks resolved, uncached ([`RealPaths::of`] for many files of
/// few directories); `None` when the directory does not exist.
pub fn real_path(path: &Path) -> Option<PathBuf> {
    RealPaths::default().of(path)
}

impl RealPaths {
    /// [`RealPaths::of`], or `path` itself when its directory does not exist.
    pub fn or_same(&mut self, path: &Path) -> PathBuf {
        self.of(path).unwrap_or_else(|| path.to_path_buf())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_symlinked_directory_resolves_to_the_real_one() {
        let base = std::env::temp_dir().join(format!("lakehouse-real-{}", uuid::Uuid::new_v4()));
        let real = base.join("real");
        std::fs::create_dir_all(real.join("p=1")).unwrap();
        std::os::unix::fs::symlink(&real, base.join("link")).unwrap();
        let real = std::fs::canonicalize(&real).unwrap();
        let mut paths = RealPaths::default();
        assert_eq!(paths.of(&base.join("link/p=1/f.parquet")), Some(real.join("p=1/f.parquet")));
        assert_eq!(paths.of(&base.join("link/../real/p=1/f.parquet")), Some(real.join("p=1/f.parquet")));
        assert_eq!(paths.of(&base.join("gone/f.parquet")), None);
        assert_eq!(paths.or_same(&base.join("gone/f.parquet")), base.join("gone/f.parquet"));
        std::fs::remove_dir_all(base).unwrap();
    }
}
