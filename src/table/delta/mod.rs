//! Reading a Delta Lake table through delta-rs (`deltalake-core`): the current version's live
//! files (add actions) in the format-neutral model, the protocol, the metadata and the schema.
//!
//! A table is a directory with `_delta_log/`. Its state is read once per call (log replay with
//! checkpoints, by delta-rs); what maintenance needs of the protocol, the metadata and the schema
//! is kept as JSON, as the log writes it, so that the checks here read the log's own field names.
//! Partition labels print as Delta/Hive directories do (`col=value/…`, Hive's path escaping,
//! `__HIVE_DEFAULT_PARTITION__` for null). A file with a deletion vector is modelled as a data
//! file plus a position-delete file naming it (its record count: the rows the vector deletes), so
//! the profile counts deletion vectors as delete files and the planner knows each file's deleted
//! share; [`deletion_vector`] reads the vectors themselves.

pub mod commit;
pub mod deletion_vector;
pub mod domains;
pub mod log_store;
pub mod row_tracking;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use deltalake_core::DeltaTable;
use deltalake_core::kernel::Remove;
use futures::TryStreamExt;
use serde_json::Value;

use crate::error::{Error, ErrorKind, Result};
use crate::runtime;
use crate::table::{DataFile, FileContent, PartitionKey};
use log_store::{register_log_stores, table_url};

/// Hive's name for a null partition value.
pub const HIVE_NULL: &str = "__HIVE_DEFAULT_PARTITION__";

/// One live file of the current version, as the log has it.
#[derive(Debug, Clone)]
pub struct LiveFile {
    /// Path relative to the table root (decoded), or an absolute URI.
    pub path: String,
    /// The file on disk.
    pub local_path: PathBuf,
    /// Size in bytes.
    pub size_bytes: u64,
    /// `numRecords` from the stats, when present.
    pub num_records: Option<u64>,
    /// `nullCount` of each top-level column the stats count.
    pub null_counts: HashMap<String, u64>,
    /// Partition values by column, as the log writes them (null: `None`).
    pub partition_values: HashMap<String, Option<String>>,
    /// The deletion vector's cardinality (rows deleted), when the file has one.
    pub deletion_vector_rows: Option<u64>,
    /// The deletion vector's own file, when it is stored in a file (`u`/`p` storage).
    pub deletion_vector_path: Option<PathBuf>,
    /// The remove action that retires this file (dataChange as given, with its `baseRowId` and
    /// `defaultRowCommitVersion` under row tracking), for commits.
    pub remove: Remove,
}

/// A Delta table as of its latest version.
pub struct DeltaLakeTable {
    /// The table directory (absolute).
    pub root: PathBuf,
    /// delta-rs's table, loaded.
    pub table: DeltaTable,
    /// The version read.
    pub version: i64,
    /// The protocol action, as JSON (`minReaderVersion`, `readerFeatures`, …).
    pub protocol: Value,
    /// The metadata action, as JSON (`partitionColumns`, `configuration`, `schemaString`, …).
    pub metadata: Value,
    /// The parsed `schemaString`.
    pub schema: Value,
    /// Live files of the version.
    pub files: Vec<LiveFile>,
    /// Row tracking, when the metadata configures it ([`row_tracking`]).
    pub row_tracking: Option<row_tracking::RowTracking>,
    /// The clustering columns (as the files name them) of a clustered table (the `clustering`
    /// feature and its [`domains::CLUSTERING`] domain).
    pub clustering: Option<Vec<Vec<String>>>,
}

impl std::fmt::Debug for DeltaLakeTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeltaLakeTable").field("root", &self.root).field("version", &self.version).finish()
    }
}

/// Whether `dir` is a Delta table directory.
pub fn is_delta_dir(dir: &Path) -> bool {
    dir.join("_delta_log").is_dir()
}

impl DeltaLakeTable {
    /// The table's root ([`crate::store::TableRoot::of_directory`] of [`DeltaLakeTable::root`]).
    pub fn table_root(&self) -> Result<crate::store::TableRoot> {
        crate::store::TableRoot::of_directory(&self.root.to_string_lossy())
    }

    /// Loads the latest version of the table at `dir`.
    pub fn load(dir: &Path) -> Result<Self> {
        let remote = crate::store::local_path(&dir.to_string_lossy()).is_none();
        let root = if remote {
            PathBuf::from(crate::store::canonical(dir.to_string_lossy().trim_end_matches('/')))
        } else {
            std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf())
        };
        let url = table_url(&root)
            .ok_or_else(|| Error::invalid(format!("'{}' is not a usable table directory", root.display())))?;
        let (table, files) = runtime::block_on(async {
            let table = if remote {
                // Through this crate's S3 client (the credentials resolved for the table), with
                // delta-rs's default log store: commits are conditional puts (If-None-Match).
                register_log_stores();
                let store = crate::store::bucket_store(&root.to_string_lossy())?;
                deltalake_core::DeltaTableBuilder::from_url(url.clone())
                    .map_err(|e| delta_error(&root, e))?
                    .with_storage_backend(store, url)
                    .load()
                    .await
                    .map_err(|e| delta_error(&root, e))?
            } else {
                deltalake_core::open_table(url).await.map_err(|e| delta_error(&root, e))?
            };
            let files = live_files(&table, &root).await?;
            Ok::<_, Error>((table, files))
        })??;
        let state = table.snapshot().map_err(|e| delta_error(&root, e))?;
        let version = state.version() as i64;
        let mut files = files;
        let protocol = serde_json::to_value(state.protocol()).map_err(|e| corrupt(&root, e))?;
        let metadata = serde_json::to_value(state.metadata()).map_err(|e| corrupt(&root, e))?;
        let schema: Value = metadata
            .get("schemaString")
            .and_then(Value::as_str)
            .map(serde_json::from_str)
            .transpose()
            .map_err(|e| corrupt(&root, e))?
            .unwrap_or(Value::Null);
        let configuration = metadata.get("configuration").cloned().unwrap_or(Value::Null);
        let tracked_columns = row_tracking::columns(&configuration);
        let clustered = protocol
            .get("writerFeatures")
            .and_then(Value::as_array)
            .is_some_and(|f| f.iter().any(|f| f.as_str() == Some("clustering")));
        let wanted: Vec<&str> = [(tracked_columns.is_some(), row_tracking::DOMAIN), (clustered, domains::CLUSTERING)]
            .into_iter()
            .filter_map(|(needed, name)| needed.then_some(name))
            .collect();
        // In the runtime, as every read of the log (the kernel's engine runs on it); one pass
        // for both domains.
        let found = match wanted.is_empty() {
            true => HashMap::new(),
            false => runtime::block_on(async { domains::system_domains(&table, &root, &wanted) })??,
        };
        let row_tracking = match tracked_columns {
            None => None,
            Some(columns) => {
                let domain = found.get(row_tracking::DOMAIN);
                let (tracking, ids) = runtime::block_on(row_tracking::read(&table, columns, domain, &root))??;
                for f in &mut files {
                    if let Some((base, version)) = ids.get(&f.path) {
                        f.remove.base_row_id = *base;
                        f.remove.default_row_commit_version = *version;
                    }
                }
                Some(tracking)
            }
        };
        let clustering =
            found.get(domains::CLUSTERING).map(|config| domains::clustering_columns(config, &root)).transpose()?;
        Ok(Self { root, table, version, protocol, metadata, schema, files, row_tracking, clustering })
    }

    /// The partition columns, in the table's order.
    pub fn partition_columns(&self) -> Vec<String> {
        self.metadata
            .get("partitionColumns")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(|c| c.as_str().map(str::to_string)).collect())
            .unwrap_or_default()
    }

    /// Each partition column's name and the key its values have in `partitionValues`: the
    /// column's physical name under column mapping (`delta.columnMapping.physicalName`), else
    /// its name.
    pub fn partition_keys(&self) -> Vec<(String, String)> {
        let mapped = self.property("delta.columnMapping.mode").is_some_and(|m| m != "none");
        self.partition_columns()
            .into_iter()
            .map(|name| {
                let physical = mapped
                    .then(|| {
                        self.fields()
                            .into_iter()
                            .find(|f| f.get("name").and_then(Value::as_str) == Some(name.as_str()))?
                            .get("metadata")?
                            .get("delta.columnMapping.physicalName")?
                            .as_str()
                            .map(str::to_string)
                    })
                    .flatten();
                let key = physical.unwrap_or_else(|| name.clone());
                (name, key)
            })
            .collect()
    }

    /// A table property (`delta.…`) as the metadata configuration has it.
    pub fn property(&self, key: &str) -> Option<&str> {
        self.metadata.get("configuration").and_then(|c| c.get(key)).and_then(Value::as_str)
    }

    /// Whether a writer of the table must also convert each commit to Iceberg metadata (UniForm):
    /// Iceberg is among `delta.universalFormat.enabledFormats`.
    pub fn converts_to_iceberg(&self) -> bool {
        self.property("delta.universalFormat.enabledFormats")
            .is_some_and(|formats| formats.split(',').any(|f| f.trim().eq_ignore_ascii_case("iceberg")))
    }

    /// Whether the table keeps Iceberg metadata in `metadata/` beside its log (UniForm): Iceberg
    /// is among `delta.universalFormat.enabledFormats`, or an Iceberg compatibility writer
    /// feature (`icebergCompatV1`…, `icebergWriterCompatV1`…) is listed — also after UniForm was
    /// switched off, since its metadata directory stays.
    pub fn keeps_iceberg_metadata(&self) -> bool {
        self.converts_to_iceberg()
            || self
                .features("writerFeatures")
                .iter()
                .any(|f| f.starts_with("icebergCompat") || f.starts_with("icebergWriterCompat"))
    }

    /// The protocol's `readerFeatures` or `writerFeatures` (`key`; empty when absent).
    pub fn features(&self, key: &str) -> Vec<String> {
        self.protocol
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect()
    }

    /// What of the protocol a caller that knows reader features `readers` and writer features
    /// `writers` (and protocol versions up to 3 / 7) does not know, described (`needs protocol
    /// reader 4 / writer 7, newer than 3 / 7`, `uses writer feature 'x'`); `None` when nothing.
    pub fn unknown_protocol(&self, readers: &[&str], writers: &[&str]) -> Option<String> {
        let version = |key: &str| self.protocol.get(key).and_then(Value::as_i64).unwrap_or(0);
        let (reader, writer) = (version("minReaderVersion"), version("minWriterVersion"));
        if reader > 3 || writer > 7 {
            return Some(format!("needs protocol reader {reader} / writer {writer}, newer than 3 / 7"));
        }
        if let Some(f) = self.features("readerFeatures").into_iter().find(|f| !readers.contains(&f.as_str())) {
            return Some(format!("uses reader feature '{f}'"));
        }
        self.features("writerFeatures")
            .into_iter()
            .find(|f| !writers.contains(&f.as_str()))
            .map(|f| format!("uses writer feature '{f}'"))
    }

    /// The top-level fields of the schema (`name`, `type`, `nullable`, `metadata`).
    pub fn fields(&self) -> Vec<&Value> {
        self.schema.get("fields").and_then(Value::as_array).map(|f| f.iter().collect()).unwrap_or_default()
    }

    /// The `_delta_log` directory.
    pub fn log_dir(&self) -> PathBuf {
        self.root.join("_delta_log")
    }

    /// The files directly in `_delta_log/`, on disk or on object storage, with sizes and ages.
    pub fn log_entries(&self) -> Result<Vec<LogEntry>> {
        let dir = self.log_dir();
        let text = dir.to_string_lossy().into_owned();
        if crate::store::local_path(&text).is_none() {
            let listed = runtime::block_on(crate::store::list(&text))??;
            return Ok(listed
                .into_iter()
                .filter_map(|o| {
                    let name = o.location.strip_prefix(&format!("{text}/"))?.to_string();
                    (!name.contains('/')).then(|| LogEntry {
                        name,
                        path: PathBuf::from(&o.location),
                        size_bytes: o.size_bytes,
                        modified_ms: o.modified_ms,
                    })
                })
                .collect());
        }
        let mut out = Vec::new();
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            let meta = entry.metadata()?;
            if !meta.is_file() {
                continue;
            }
            let modified_ms = meta
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_millis() as i64);
            out.push(LogEntry {
                name: entry.file_name().to_string_lossy().into_owned(),
                path: entry.path(),
                size_bytes: meta.len(),
                modified_ms,
            });
        }
        Ok(out)
    }

    /// The live files in the format-neutral model: every data file, and for each deletion
    /// vector a position-delete file that names its data file.
    pub fn model_files(&self) -> Vec<DataFile> {
        let keys = self.partition_keys();
        let columns: Vec<String> = keys.iter().map(|(name, _)| name.clone()).collect();
        let mut out = Vec::with_capacity(self.files.len());
        for f in &self.files {
            let values: Vec<Option<&str>> =
                keys.iter().map(|(_, key)| f.partition_values.get(key).and_then(|v| v.as_deref())).collect();
            let key = PartitionKey { spec_id: 0, values: format!("{values:?}") };
            let data = DataFile {
                path: f.local_path.to_string_lossy().into_owned(),
                size_bytes: f.size_bytes,
                record_count: f.num_records.unwrap_or(0),
                partition: partition_label(&columns, &values),
                spec_id: 0,
                key,
                global: false,
                data_sequence_number: 0,
                referenced_data_file: None,
                content: FileContent::Data,
                parquet: true,
                content_offset: None,
            };
            if let Some(rows) = f.deletion_vector_rows {
                out.push(DataFile {
                    size_bytes: 0,
                    record_count: rows,
                    referenced_data_file: Some(data.path.clone()),
                    content: FileContent::PositionDeletes,
                    ..data.clone()
                });
            }
            out.push(data);
        }
        out
    }
}

async fn live_files(table: &DeltaTable, root: &Path) -> Result<Vec<LiveFile>> {
    let state = table.snapshot().map_err(|e| delta_error(root, e))?;
    let log_store = table.log_store();
    let views: Vec<_> =
        state.snapshot().file_views(log_store.as_ref(), None).try_collect().await.map_err(|e| delta_error(root, e))?;
    let mut files = Vec::with_capacity(views.len());
    for view in views {
        let path = view.path().to_string();
        let remove = view.remove_action(false);
        let dv = view.deletion_vector_descriptor();
        let null_counts = view
            .stats()
            .and_then(|s| serde_json::from_str::<Value>(&s).ok())
            .and_then(|s| s.get("nullCount").and_then(Value::as_object).cloned())
            .map(|m| m.into_iter().filter_map(|(k, v)| Some((k, v.as_u64()?))).collect())
            .unwrap_or_default();
        files.push(LiveFile {
            null_counts,
            local_path: resolve(root, &path),
            size_bytes: view.size().max(0) as u64,
            num_records: view.num_records().map(|n| n as u64),
            partition_values: remove.partition_values.clone().unwrap_or_default(),
            deletion_vector_rows: dv.as_ref().map(|d| d.cardinality.max(0) as u64),
            deletion_vector_path: dv.as_ref().and_then(|d| deletion_vector_file(root, d)),
            remove,
            path,
        });
    }
    Ok(files)
}

/// The file a deletion vector is stored in (`u`: beside the table root, named by its uuid; `p`:
/// an absolute path); `None` for an inline one.
pub fn deletion_vector_file(root: &Path, dv: &deltalake_core::kernel::DeletionVectorDescriptor) -> Option<PathBuf> {
    use buoyant_kernel::actions::deletion_vector::DeletionVectorDescriptor as KernelDescriptor;
    let kernel = KernelDescriptor {
        storage_type: dv.storage_type.as_ref().parse().ok()?,
        path_or_inline_dv: dv.path_or_inline_dv.clone(),
        offset: dv.offset,
        size_in_bytes: dv.size_in_bytes,
        cardinality: dv.cardinality,
    };
    let url = table_url(root)?;
    let absolute = kernel.absolute_path(&url).ok().flatten()?;
    crate::store::url_to_location(&absolute)
}

/// A file of `_delta_log/`.
#[derive(Debug, Clone)]
pub struct LogEntry {
    /// Its name.
    pub name: String,
    /// Its location.
    pub path: PathBuf,
    /// Its size.
    pub size_bytes: u64,
    /// Last modification, milliseconds since the epoch.
    pub modified_ms: i64,
}

/// What a file in `_delta_log/` is, by its name (the protocol's: versions are 20 digits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFile {
    /// `<v>.json`.
    Commit(i64),
    /// `<v>.checkpoint.parquet`, `<v>.checkpoint.<part>.<parts>.parquet` (Parquet) or a v2
    /// `<v>.checkpoint.<uuid>.{json,parquet}`.
    Checkpoint { version: i64, parquet: bool },
}

impl LogFile {
    /// `None` for anything else: checksums (`<v>.crc`, Hadoop's `.<name>.crc`),
    /// `_last_checkpoint`, temporary and compacted files.
    pub fn of(name: &str) -> Option<Self> {
        let (v, rest) = name.split_once('.')?;
        if v.len() != 20 {
            return None;
        }
        let version = v.parse::<i64>().ok()?;
        if rest == "json" {
            Some(LogFile::Commit(version))
        } else if rest.starts_with("checkpoint.") && (rest.ends_with(".parquet") || rest.ends_with(".json")) {
            Some(LogFile::Checkpoint { version, parquet: rest.ends_with(".parquet") })
        } else {
            None
        }
    }
}

/// A log file's text, on disk or on object storage.
pub fn read_log_file(path: &Path) -> Result<String> {
    let text = path.to_string_lossy();
    if crate::store::local_path(&text).is_none() {
        let bytes = runtime::block_on(crate::store::read(&text))??;
        return Ok(String::from_utf8_lossy(&bytes).into_owned());
    }
    Ok(std::fs::read_to_string(path)?)
}

/// A path from the log (relative to the root, or an absolute `file:` URI) as a local path.
pub fn resolve(root: &Path, path: &str) -> PathBuf {
    if crate::store::local_path(path).is_none() {
        return PathBuf::from(crate::store::canonical(path));
    }
    crate::store::uri_to_local_path(path).unwrap_or_else(|| root.join(path))
}

/// `col=value/…` as Delta (Hive) names partition directories; `(unpartitioned)` without columns.
pub fn partition_label(columns: &[String], values: &[Option<&str>]) -> String {
    if columns.is_empty() {
        return crate::table::UNPARTITIONED.to_string();
    }
    columns
        .iter()
        .zip(values)
        .map(|(c, v)| format!("{}={}", escape_path_name(c), v.map_or(HIVE_NULL.to_string(), escape_path_name)))
        .collect::<Vec<_>>()
        .join("/")
}

/// Hive's `FileUtils.escapePathName` (what Spark and delta-rs use for partition directories):
/// control characters and `"#%'*/:=?\{[]^` and DEL become `%XX`; an empty value is Hive's null.
pub fn escape_path_name(value: &str) -> String {
    if value.is_empty() {
        return HIVE_NULL.to_string();
    }
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        let escape = matches!(
            c,
            '\u{01}'
                ..='\u{1F}'
                    | '"'
                    | '#'
                    | '%'
                    | '\''
                    | '*'
                    | '/'
                    | ':'
                    | '='
                    | '?'
                    | '\\'
                    | '\u{7F}'
                    | '{'
                    | '['
                    | ']'
                    | '^'
        );
        if escape {
            out.push_str(&format!("%{:02X}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

fn corrupt(root: &Path, e: impl std::fmt::Display) -> Error {
    Error::new(ErrorKind::CorruptMetadata, format!("Delta table '{}': cannot read its log: {e}", root.display()))
}

/// A delta-rs error as ours, naming the table.
pub fn delta_error(root: &Path, e: deltalake_core::DeltaTableError) -> Error {
    use deltalake_core::DeltaTableError as E;
    let kind = match &e {
        E::NotATable(_) | E::InvalidTableLocation(_) => ErrorKind::NotFound,
        E::Transaction { .. } => ErrorKind::CommitConflict,
        E::ObjectStore { .. } | E::Io { .. } => ErrorKind::Io,
        _ => ErrorKind::CorruptMetadata,
    };
    Error::new(kind, format!("Delta table '{}': {e}", root.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_files_are_known_by_their_names() {
        let v = 3;
        assert_eq!(LogFile::of("00000000000000000003.json"), Some(LogFile::Commit(v)));
        assert_eq!(
            LogFile::of("00000000000000000003.checkpoint.parquet"),
            Some(LogFile::Checkpoint { version: v, parquet: true })
        );
        assert_eq!(
            LogFile::of("00000000000000000003.checkpoint.0000000001.0000000002.parquet"),
            Some(LogFile::Checkpoint { version: v, parquet: true })
        );
        assert_eq!(
            LogFile::of("00000000000000000003.checkpoint.80a083e8-7026-4e79-81be-64bd76c43a11.json"),
            Some(LogFile::Checkpoint { version: v, parquet: false })
        );
        for other in [
            "00000000000000000003.crc",
            ".00000000000000000003.json.crc",
            "_last_checkpoint",
            "3.json",
            "00000000000000000003.00000000000000000005.compacted.json",
            "_commit_x.json.tmp",
        ] {
            assert_eq!(LogFile::of(other), None, "{other}");
        }
    }

    #[test]
    fn partition_directories_are_escaped_as_hive_escapes_them() {
        let cases = [
            ("plain", "plain"),
            ("a b", "a b"),
            ("a/b=c", "a%2Fb%3Dc"),
            ("100%", "100%25"),
            ("x:y?z", "x%3Ay%3Fz"),
            ("🦀", "🦀"),
            ("[t]{u}^", "%5Bt%5D%7Bu}%5E"),
            ("", HIVE_NULL),
        ];
        for (raw, want) in cases {
            assert_eq!(escape_path_name(raw), want, "{raw}");
        }
        let columns = vec!["p".to_string(), "q".to_string()];
        assert_eq!(partition_label(&columns, &[Some("a/b"), None]), "p=a%2Fb/q=__HIVE_DEFAULT_PARTITION__");
        assert_eq!(partition_label(&[], &[]), "(unpartitioned)");
    }
}
