//! `CALL lakehouse_serve(listen := '127.0.0.1:8787', tables := ['ns.t', …], …gate parameters…,
//! history_path := '/var/lib/lakehouse/history', max_connections := 64,
//! max_connections_per_peer := 16, stop_with_parent := true)`: the authenticated webhook that
//! runs the gate when a CDC batch lands ([`server`]); serves until Ctrl-C or SIGTERM and
//! returns one row per run.

mod auth;
mod http;
mod runs;
pub mod server;
mod signals;
mod state;

use duckdb::core::{LogicalTypeHandle, LogicalTypeId};

use crate::duck::HostDb;
use crate::error::{Error, Result};
use crate::functions::args::{Args, named};
use crate::functions::options::gate::{gate_options, gate_parameter_names};
use crate::functions::serve::server::{COLUMNS, serve};
use crate::functions::serve::state::ServeConfig;
use crate::functions::{Cell, RowFunction};

/// The server table function.
pub struct Serve;

impl RowFunction for Serve {
    const NAME: &'static str = "lakehouse_serve";
    type Input = ServeConfig;

    fn parameters() -> Vec<LogicalTypeHandle> {
        Vec::new()
    }

    fn named_parameters() -> Vec<(String, LogicalTypeHandle)> {
        let mut names = vec!["listen", "tables", "max_connections", "max_connections_per_peer", "stop_with_parent"];
        names.extend(gate_parameter_names());
        named(&names)
    }

    fn columns() -> Vec<(&'static str, LogicalTypeId)> {
        COLUMNS.to_vec()
    }

    fn parse(args: &Args) -> Result<Self::Input> {
        let listen_text = args.opt_string("listen", false)?.unwrap_or_else(|| "127.0.0.1:8787".into());
        let listen = listen_text.parse().map_err(|_| {
            Error::invalid(format!("listen must be an address:port such as '127.0.0.1:8787', got '{listen_text}'"))
        })?;
        let tables = args.opt_string_list("tables")?.unwrap_or_default();
        if tables.is_empty() || tables.iter().any(|t| t.trim().is_empty()) {
            return Err(Error::invalid(
                "tables must list the tables a trigger may name, e.g. tables := ['analytics.events']",
            ));
        }
        let (template, history) = gate_options(args, String::new())?;
        let max_connections = args.i64_in("max_connections", 64, 1, 4096)?;
        // A quarter of the slots per address by default: one peer's idle or slow connections
        // never hold them all. Behind a reverse proxy every connection is the proxy's: raise it.
        let max_connections_per_peer =
            args.i64_in("max_connections_per_peer", (max_connections / 4).max(1), 1, max_connections)?;
        Ok(ServeConfig {
            listen,
            tables,
            template,
            history,
            stop_with_parent: args.bool("stop_with_parent", true)?,
            max_connections: max_connections as usize,
            max_connections_per_peer: max_connections_per_peer as usize,
        })
    }

    fn run(input: &Self::Input, host: &HostDb) -> Result<Vec<Vec<Cell>>> {
        serve(input, host)
    }
}
