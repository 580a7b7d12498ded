//! Actions: execute a plan against a table and return what was done.

pub mod compact;
pub mod expire;
pub mod gate;
pub mod orphans;
pub mod scan;
