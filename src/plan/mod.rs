//! Plans: plain structs that say what an action would do, computed without touching a table.
//! `dry_run := true` returns a plan's figures; an empty plan is a no-op that writes nothing.

pub mod compaction;
pub mod compaction_options;
pub mod expiry;
pub mod format_options;
pub mod layout;
pub mod partition_selection;
pub mod projection;
