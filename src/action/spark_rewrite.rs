//! What the Spark executor ([`crate::action::executor`]) needs of a table format: the predicate
//! selecting one planned partition, the statements that rewrite the partitions a predicate
//! selects, the table's head before a call,
//! and the rewrite commits after it with the partitions each touched (so a commit beyond the
//! partitions sent is caught). Iceberg's is in the executor; Delta's in
//! [`crate::action::executor::delta`].

use std::collections::HashMap;

use crate::error::Result;
use crate::plan::compaction::PartitionPlan;
use crate::table::PartitionKey;

/// The executor a planned partition got, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Route {
    /// `true`: Spark.
    pub spark: bool,
    /// Why, in words.
    pub why: String,
}

/// One rewrite Spark committed after the head a call started from.
pub struct Commit {
    /// Its snapshot id (Iceberg) or version (Delta).
    pub snapshot_id: i64,
    /// Partitions whose files it added or removed.
    pub touched: HashMap<PartitionKey, Touched>,
}

/// What a commit did to one partition: its label, the data files added and removed, and the
/// bytes removed.
pub struct Touched {
    pub label: String,
    pub added: u64,
    pub removed: u64,
    pub removed_bytes: u64,
}

/// A table as Spark rewrites it.
pub trait SparkRewrite {
    /// The predicate selecting `plan`'s partition alone, or why Spark cannot be given it.
    fn predicate(&self, plan: &PartitionPlan) -> std::result::Result<String, String>;
    /// The statements, in order, that rewrite the partitions `predicate` selects (empty: the
    /// whole table).
    fn statements(&self, predicate: &str) -> Vec<String>;
    /// The table's head now (snapshot id or version; none: an empty table).
    fn head(&self) -> Result<Option<i64>>;
    /// The rewrite commits after `before`, oldest first.
    fn commits(&self, before: Option<i64>) -> Result<Vec<Commit>>;
}
