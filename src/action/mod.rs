//! Actions: execute a plan against a table and return what was done. A file that carries out an
//! SQL function is named after it (`remove_orphan_files.rs` for `lakehouse_remove_orphan_files`).

pub mod blocked;
pub mod boundary;
pub mod compact;
pub mod delete_files;
pub mod executor;
pub mod expire_snapshots;
pub mod gate;
pub mod layout;
pub mod metadata_health;
pub mod real_paths;
pub mod remove_orphan_files;
pub mod rewrite_manifests;
pub mod rewrite_position_deletes;
pub mod scan;
pub mod spark_rewrite;
pub mod uniform_view;
pub mod vacuum;
