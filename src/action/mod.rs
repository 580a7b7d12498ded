//! Actions: execute a plan against a table and return what was done.

pub mod boundary;
pub mod compact;
pub mod executor;
pub mod executor_delta;
pub mod expire;
pub mod gate;
pub mod health;
pub mod layout;
pub mod orphans;
pub mod real_paths;
pub mod rewrite_deletes;
pub mod rewrite_manifests;
pub mod scan;
pub mod spark_rewrite;
pub mod vacuum;
