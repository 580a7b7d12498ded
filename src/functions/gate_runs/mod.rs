//! What `lakehouse_gate` and `lakehouse_serve` both make of a gate run: its scorecard rows
//! ([`scorecard_rows`]) and its run history ([`history`]). Not a SQL function: the gate's and the
//! server's files use it, not each other.

pub mod history;
pub mod scorecard_rows;
