//! Actions: execute a plan against a table and return what was done.

pub mod column_defaults;
pub mod compact;
pub mod compact_delta;
pub mod executor;
pub mod expire;
pub mod gate;
pub mod layout;
pub mod orphans;
pub mod real_paths;
pub mod rewrite_manifests;
pub mod scan;
pub mod vacuum;
