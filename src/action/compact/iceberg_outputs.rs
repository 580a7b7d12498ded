//! Where an Iceberg rewrite's files go: under the table's root whatever its metadata says —
//! beside a group's first input, else where Java's default location provider puts a new data
//! file of the partition.

use ::iceberg::spec::DataFile as IcebergDataFile;

use crate::store::TableRoot;
use crate::table;
use crate::table::iceberg::IcebergTable;

/// Where one group's files go ([`Outputs::dir`]) and how many there are.
pub(super) struct Target {
    /// The directory.
    pub(super) dir: String,
    /// How many files.
    pub(super) files: usize,
}

/// Where a rewrite's files go, decided once per table against its root
/// ([`crate::store::TableRoot`]: the directory the metadata file was loaded from, not the
/// metadata's own `location`, which its writer sets).
#[derive(Debug, Clone)]
pub(super) struct Outputs {
    /// The table's root.
    pub(super) root: TableRoot,
    /// The metadata's `location` when it lies under the root, else the root.
    base: String,
    /// `write.data.path` (else `write.folder-storage.path`) when under the root, else
    /// `{base}/data`.
    data_path: String,
    /// Why a data path the table's properties name is not used.
    pub(super) notice: Option<String>,
}

impl Outputs {
    /// The outputs of `table`, whose root is `root`.
    pub(super) fn of(table: &IcebergTable, root: TableRoot) -> Outputs {
        let base = root.base(table.metadata.location());
        let properties = table.metadata.properties();
        let named = ["write.data.path", "write.folder-storage.path"]
            .iter()
            .find_map(|k| properties.get(*k).filter(|v| !v.is_empty()).map(|v| (*k, v.trim_end_matches('/'))));
        let (data_path, notice) = match named {
            Some((_, path)) if root.contains(path) => (path.to_string(), None),
            Some((key, path)) => (
                format!("{base}/data"),
                Some(format!(
                    "{key} '{path}' is outside the table's root '{}'; the rewritten files were written under \
                     '{base}/data' instead",
                    root.location()
                )),
            ),
            None => (format!("{base}/data"), None),
        };
        Outputs { root, base, data_path, notice }
    }

    /// Where a group's output goes: beside its first input when that lies inside the table
    /// location or its data path (both under the root), else where Java's default location
    /// provider puts a new data file of the partition: `{data path}/{partition path}`.
    pub(super) fn dir(&self, table: &IcebergTable, first: &IcebergDataFile, spec_id: i32) -> String {
        if let Some((dir, _)) = first.file_path().rsplit_once('/')
            && self.root.admits_output(dir)
            && (crate::store::is_inside(dir, &self.base)
                || dir == self.data_path
                || crate::store::is_inside(dir, &self.data_path))
        {
            return dir.to_string();
        }
        let partition = table.metadata.partition_spec_by_id(spec_id).map_or(String::new(), |spec| {
            let schema = table.metadata.current_schema();
            table::iceberg::partition::path(spec, schema, first.partition())
        });
        let dir = format!("{}/{partition}", self.data_path);
        // A partition path never climbs (each segment is `name=value`); checked all the same.
        if partition.is_empty() || !self.root.contains(&dir) { self.data_path.clone() } else { dir }
    }
}
