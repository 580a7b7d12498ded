//! What Iceberg maintenance may delete: files inside the table's **root**
//! ([`crate::store::table_root::TableRoot`]: the directory the maintainer named or the catalog
//! registered, i.e. the one holding the metadata directory of the metadata file we loaded) and
//! inside the metadata's `location`, which must itself lie under the root. Whoever writes a table controls its metadata: its `location` and every path in its
//! manifests. A guard that compared paths with that `location` alone let a table whose metadata
//! names another directory as its location (or `/`) delete that directory's files. On a local
//! disk the check is also made on real paths (symlinks resolved) just before each delete, so a
//! symlinked directory inside the table cannot reach outside it.

use std::path::{Path, PathBuf};

use crate::action::real_paths::real_path;
use crate::store::table_root::TableRoot;
use crate::store::{canonical, is_inside, local_real_path};
use crate::table::iceberg::IcebergTable;

/// The limits of what an expiry or orphan removal of one table may delete.
#[derive(Debug, Clone)]
pub struct Boundary {
    /// The metadata's `location` (untrusted), in its store's canonical spelling.
    location: String,
    /// Why nothing may be deleted, if nothing may.
    refusal: Option<String>,
    /// A local table's root, symlinks resolved (`None` on object storage, or when it does not
    /// exist).
    real_root: Option<PathBuf>,
}

impl Boundary {
    /// The boundary of `table`, from the metadata file it was loaded from.
    pub fn of(table: &IcebergTable) -> Self {
        Self::new(&table.metadata_location, table.metadata.location())
    }

    /// The boundary of a table whose metadata file is `metadata_location` and whose metadata
    /// names `location`.
    pub fn new(metadata_location: &str, location: &str) -> Self {
        let location = canonical(location.trim_end_matches('/'));
        let root = match TableRoot::of_metadata_file(metadata_location) {
            Ok(root) => root,
            Err(e) => {
                let refusal = Some(format!("{}; no file was deleted", e.message()));
                return Self { location, refusal, real_root: None };
            }
        };
        let root_location = root.location();
        let real_root = local_real_path(&root_location);
        // A local location that exists is judged by its real path (a symlink inside the root may
        // lead out of it; a symlink to the root is the root); any other by its name.
        let real_location = local_real_path(&location);
        let under = match (&real_root, real_location) {
            (Some(real_root), Some(real_location)) => real_location.starts_with(real_root),
            _ => root.contains(&location),
        };
        let refusal = (!under).then(|| {
            format!(
                "the table's metadata names location '{location}', which is not inside the table's root '{root_location}' (the \
                 directory that holds its metadata directory); nothing is deleted outside the root, so no file was \
                 deleted"
            )
        });
        Self { location, refusal, real_root }
    }

    /// Why nothing may be deleted: the metadata's `location` lies outside the root.
    pub fn refusal(&self) -> Option<&str> {
        self.refusal.as_deref()
    }

    /// Whether `path` (as metadata or a listing names it) may be deleted: inside the location,
    /// which lies under the root (a local location may be another spelling of a directory under
    /// it: a symlink, another mount). Checked again on the real path before a local delete
    /// ([`Boundary::real_root`]).
    pub fn admits(&self, path: &str) -> bool {
        // Compared in the store's canonical spelling, as the location is (`s3a://` is `s3://`).
        self.refusal.is_none() && is_inside(&canonical(path), &self.location)
    }

    /// A local table's root, symlinks resolved, which every local delete is checked against
    /// just before it ([`within_real`]); `None` on object storage, or for a local root that does
    /// not exist (no file under it exists either).
    pub fn real_root(&self) -> Option<&Path> {
        self.real_root.as_deref()
    }
}

/// Whether the local file `path`, its directory's symlinks resolved ([`real_path`]), lies
/// strictly inside `real_root` (itself resolved). A file whose directory cannot be resolved is not.
pub fn within_real(path: &Path, real_root: &Path) -> bool {
    real_path(path).is_some_and(|real| real != real_root && real.starts_with(real_root))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_location_outside_the_root_admits_nothing() {
        let inside = Boundary::new("/w/t/metadata/v2.metadata.json", "/w/t");
        assert!(inside.refusal().is_none());
        assert!(inside.admits("/w/t/data/a.parquet"));
        assert!(!inside.admits("/w/other/a.parquet"));
        assert!(!inside.admits("/w/t/../other/a.parquet"), "normalized before comparing");
        assert!(!inside.admits("/w/tt/a.parquet"), "by components, not text");
        let data_under = Boundary::new("/w/t/metadata/v2.metadata.json", "file:///w/t/data/");
        assert!(data_under.refusal().is_none() && data_under.admits("/w/t/data/a.parquet"));
        for hostile in ["/w", "/", "/w/other", "file:///w/t/../other"] {
            let b = Boundary::new("/w/t/metadata/v2.metadata.json", hostile);
            assert!(b.refusal().unwrap().contains("not inside the table's root '/w/t'"), "{hostile}");
            assert!(!b.admits("/w/t/data/a.parquet"), "{hostile}: nothing at all");
        }
        let s3 = Boundary::new("s3://b/w/t/metadata/v2.metadata.json", "s3://other/w/t");
        assert!(s3.refusal().is_some(), "another bucket");
        let s3 = Boundary::new("s3://b/w/t/metadata/v2.metadata.json", "s3a://b/w/t");
        assert!(s3.refusal().is_none() && s3.admits("s3://b/w/t/data/x.parquet") && !s3.admits("s3://b/w/x.parquet"));
        assert!(s3.admits("s3a://b/w/t/data/x.parquet"), "a file named in the location's own spelling");
        assert!(s3.real_root().is_none(), "object storage has no real path");
    }

    #[test]
    fn a_symlinked_directory_inside_the_root_is_outside_it_really() {
        let base = std::env::temp_dir().join(format!("lakehouse-boundary-{}", uuid::Uuid::new_v4()));
        let (root, victim) = (base.join("t"), base.join("victim"));
        std::fs::create_dir_all(root.join("data")).unwrap();
        std::fs::create_dir_all(&victim).unwrap();
        std::os::unix::fs::symlink(&victim, root.join("data/evil")).unwrap();
        let real_root = std::fs::canonicalize(&root).unwrap();
        assert!(within_real(&root.join("data/a.parquet"), &real_root));
        assert!(!within_real(&root.join("data/evil/a.parquet"), &real_root), "the link leads outside");
        assert!(!within_real(&root.join("gone/a.parquet"), &real_root), "an unresolvable directory");
        // A location that is another spelling of the root (a symlink to it) lies under it; one
        // that links outside does not.
        std::os::unix::fs::symlink(&root, base.join("alias")).unwrap();
        let metadata = root.join("metadata/v1.metadata.json").to_string_lossy().into_owned();
        let aliased = Boundary::new(&metadata, &base.join("alias").to_string_lossy());
        assert!(aliased.refusal().is_none() && aliased.admits(&base.join("alias/data/a.parquet").to_string_lossy()));
        let away = Boundary::new(&metadata, &root.join("data/evil").to_string_lossy());
        assert!(away.refusal().is_some(), "a location inside the root by name, outside by its real path");
        std::fs::remove_dir_all(base).unwrap();
    }
}
