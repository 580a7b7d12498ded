//! The Spark executor on Delta tables: Delta Lake's own ``OPTIMIZE delta.`<root>` WHERE
//! (<a partition's predicate>) OR (…) [ZORDER BY (…)]`` over Spark Connect, the Spark session
//! set first to our plan's sizes (`spark.databricks.delta.optimize.maxFileSize` = our target,
//! `minFileSize` = our small-file threshold: only small files are rewritten, into files of the
//! target). Spark needs Delta's jars and `DeltaSparkSessionExtension`; the table is named by its
//! location, so no catalog is shared.
//!
//! Delta matches `WHERE` against the partition values of the log, so a partition's predicate is
//! its columns equal to its values ([`crate::spark::predicate::delta_partition_predicate`]).
//! After the call the log is read from the version the call started at: every commit whose
//! `commitInfo` says OPTIMIZE (or that has none) must add and remove files of the partitions
//! sent only, as with Iceberg. Not sent (local under `auto`, refused under `spark`): the `sort`
//! layout (Delta's OPTIMIZE has none: binpack and z-order only), clustered tables (OPTIMIZE
//! clusters the whole table and takes no WHERE), partition values with no exact literal.

use std::collections::HashMap;
use std::path::PathBuf;

use serde_json::Value;

use crate::action::spark_rewrite::{Commit, SparkRewrite, Touched};
use crate::error::{Error, ErrorKind, Result};
use crate::plan::compaction::{CompactionOptions, PartitionPlan};
use crate::plan::layout::Layout;
use crate::profile::MIB;
use crate::spark::predicate::{delta_partition_predicate, identifier};
use crate::table::PartitionKey;
use crate::table::delta::{DeltaLakeTable, partition_label, read_log_file};

/// A Delta table as Spark rewrites it.
pub struct DeltaOnSpark {
    root: PathBuf,
    /// Each partition column's name and Delta type.
    columns: Vec<(String, String)>,
    /// Each partition column's key in `partitionValues` (its physical name under column mapping).
    keys: Vec<String>,
    /// Each planned partition's values, as the live files give them.
    values: HashMap<PartitionKey, Vec<Option<String>>>,
    clustered: bool,
    layout: Layout,
    target_bytes: u64,
    small_bytes: u64,
}

impl DeltaOnSpark {
    /// The table as `options` and the planned `layout` have Spark rewrite it.
    pub fn new(table: &DeltaLakeTable, options: &CompactionOptions, layout: &Layout) -> Self {
        let keys = table.partition_keys();
        let types: HashMap<&str, String> = table
            .fields()
            .into_iter()
            .filter_map(|f| {
                let name = f.get("name")?.as_str()?;
                Some((name, f.get("type")?.as_str().unwrap_or("struct").to_string()))
            })
            .collect();
        let columns: Vec<(String, String)> = keys
            .iter()
            .map(|(name, _)| (name.clone(), types.get(name.as_str()).cloned().unwrap_or_else(|| "unknown".into())))
            .collect();
        // Keyed as the table's model keys its files (`DeltaLakeTable::model_files`).
        let mut values = HashMap::new();
        for file in &table.files {
            let of_file: Vec<Option<&str>> =
                keys.iter().map(|(_, key)| file.partition_values.get(key).and_then(|v| v.as_deref())).collect();
            let key = PartitionKey { spec_id: 0, values: format!("{of_file:?}") };
            values.entry(key).or_insert_with(|| of_file.iter().map(|v| v.map(str::to_string)).collect());
        }
        Self {
            root: table.root.clone(),
            columns,
            keys: keys.into_iter().map(|(_, key)| key).collect(),
            values,
            clustered: table.clustering.is_some(),
            layout: layout.clone(),
            target_bytes: (options.target_file_size_mb * MIB) as u64,
            small_bytes: options.thresholds.small_file_threshold_bytes() as u64,
        }
    }

    /// The key and label of a file the log names, from its `partitionValues`.
    fn partition_of(&self, action: &Value) -> (PartitionKey, String) {
        let map = action.get("partitionValues").and_then(Value::as_object);
        let values: Vec<Option<&str>> =
            self.keys.iter().map(|k| map.and_then(|m| m.get(k)).and_then(Value::as_str)).collect();
        let names: Vec<String> = self.columns.iter().map(|(n, _)| n.clone()).collect();
        (PartitionKey { spec_id: 0, values: format!("{values:?}") }, partition_label(&names, &values))
    }
}

impl SparkRewrite for DeltaOnSpark {
    fn predicate(&self, plan: &PartitionPlan) -> std::result::Result<String, String> {
        if self.clustered {
            return Err("the table is clustered (liquid clustering), and Delta's OPTIMIZE takes no WHERE on it".into());
        }
        if let Layout::Sort { .. } = self.layout {
            return Err("Delta's OPTIMIZE has no sort (binpack and zorder only)".into());
        }
        let values = self.values.get(&plan.key).ok_or("its partition values were not found in the table's files")?;
        let values: Vec<Option<&str>> = values.iter().map(Option::as_deref).collect();
        delta_partition_predicate(&self.columns, &values)
    }

    fn statements(&self, predicate: &str) -> Vec<String> {
        let table = format!("delta.{}", identifier(&self.root.to_string_lossy()));
        let filter = if predicate.is_empty() { String::new() } else { format!(" WHERE {predicate}") };
        let zorder = match &self.layout {
            Layout::Zorder(columns) => {
                format!(" ZORDER BY ({})", columns.iter().map(|c| identifier(c)).collect::<Vec<_>>().join(", "))
            }
            _ => String::new(),
        };
        vec![
            format!("SET spark.databricks.delta.optimize.maxFileSize = {}", self.target_bytes),
            format!("SET spark.databricks.delta.optimize.minFileSize = {}", self.small_bytes),
            format!("OPTIMIZE {table}{filter}{zorder}"),
        ]
    }

    fn head(&self) -> Result<Option<i64>> {
        Ok(Some(DeltaLakeTable::load(&self.root)?.version))
    }

    fn commits(&self, before: Option<i64>) -> Result<Vec<Commit>> {
        let now = DeltaLakeTable::load(&self.root)?.version;
        let mut commits = Vec::new();
        for version in before.map_or(0, |v| v + 1)..=now {
            let path = self.root.join("_delta_log").join(format!("{version:020}.json"));
            let text = read_log_file(&path)?;
            let actions: Vec<Value> = text
                .lines()
                .filter(|l| !l.trim().is_empty())
                .map(serde_json::from_str)
                .collect::<std::result::Result<_, _>>()
                .map_err(|e| {
                    Error::new(ErrorKind::CorruptMetadata, format!("log file '{}' cannot be read: {e}", path.display()))
                })?;
            let operation = actions.iter().find_map(|a| a.get("commitInfo")?.get("operation")?.as_str());
            if operation.is_some_and(|op| op != "OPTIMIZE") {
                continue;
            }
            let mut commit = Commit { snapshot_id: version, touched: HashMap::new() };
            for action in &actions {
                let (added, body) = match (action.get("add"), action.get("remove")) {
                    (Some(add), _) => (true, add),
                    (_, Some(remove)) => (false, remove),
                    _ => continue,
                };
                let (key, label) = self.partition_of(body);
                let touched = commit.touched.entry(key).or_insert_with(|| Touched {
                    label,
                    added: 0,
                    removed: 0,
                    removed_bytes: 0,
                });
                if added {
                    touched.added += 1;
                } else {
                    touched.removed += 1;
                    touched.removed_bytes += body.get("size").and_then(Value::as_u64).unwrap_or(0);
                }
            }
            commits.push(commit);
        }
        Ok(commits)
    }
}
