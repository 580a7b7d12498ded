//! # lakehouse — the maintenance gate for Apache Iceberg and Delta Lake tables, inside DuckDB
//!
//! A DuckDB loadable extension that profiles small-file fragmentation per partition, compacts
//! the degraded partitions, retires history (Iceberg snapshot expiry and orphan removal, Delta
//! VACUUM) and sends a scorecard to Slack. Metadata is read and written in Rust through
//! iceberg-rust and delta-rs; data files are written by DuckDB itself on a nested connection.
//!
//! ## Layout
//!
//! Layers, lowest first; a module uses only its own layer or lower ones, and no two modules use
//! each other, directly or round a longer cycle (`scripts/module_graph.py --check`, part of `make
//! test`, fails otherwise; it counts `crate::`, `super::`, `self::` and bare child paths, and
//! follows a re-export to the file that defines the item):
//! `error`/`runtime`/`interrupt`/`progress_lines`/`scheduler` → [`duck`] → [`store`] → [`catalog`]
//! → [`table`] (and [`spark`]) → [`profile`]/[`plan`]/[`report`] → [`notify`] →
//! [`action`]/[`demo`] → [`functions`]. A folder's `mod.rs` that others import through re-exports
//! holds no code its children use (else it and they would use each other): shared code sits in a
//! child of its own ([`table::model`], [`functions::row_function`]).
//!
//! - [`error`]: `Error { kind, message, context }` and the crate's `Result`; [`runtime`]: the
//!   Tokio runtime iceberg-rust's and delta-rs's async I/O run on; [`interrupt`]: Ctrl-C recorded
//!   while long work runs, checked between its steps; [`progress_lines`]: what long work finished,
//!   on stderr with `progress := true` (the C API has no progress bar for us); [`scheduler`]: a table function's work runs
//!   on a thread of ours while DuckDB's thread executes DuckDB's queued tasks (so every thread
//!   works on the nested statements, whichever took the init).
//! - [`duck`]: the nested host connection (driven through C API `v1.2.0` functions only, so
//!   every DuckDB from 1.3 to 2.0 runs it; the settings that change what SQL means pinned on it)
//!   and SQL quoting (the only place SQL text is built; a file to read through `quote_file`, which
//!   DuckDB cannot take for a glob pattern); [`duck::secret_lease`]: temporary secrets that last
//!   only as long as the work that needs them.
//! - [`store`]: where files live. [`store::location`] parses a location once
//!   ([`store::Location`]: a local path or `file:` URI, or an [`store::ObjectLocation`] —
//!   `s3://bucket/key`, Azure's `az://container/key` and `abfss://`/`wasbs://` spellings, GCS's
//!   `gs://bucket/key`; other schemes refused by name) — nothing outside `store` looks at a
//!   location's scheme: it asks [`store::local_path`] (or [`store::duckdb_path`],
//!   [`store::sync_local`], [`store::create_parent_dir`], [`store::local_real_path`]); a `file:` URI
//!   or URL from a Delta log becomes a path through [`store::uri_to_local_path`] and
//!   [`store::url_to_location`]; the `http(s)://` of an endpoint is the catalogs' and the clients'
//!   own. Each object store is a [`store::StoreBackend`] ([`store::backend`]: its schemes, its
//!   settings from a catalog's properties, its object_store client, its DuckDB secret, its Delta
//!   log store) in its own file — [`store::s3`], [`store::azure`], [`store::gcs`] — listed once
//!   in [`store::stores::STORES`], which everything dispatches through by scheme;
//!   [`store::object`] reads, writes (conditional ones too), lists and batch-deletes objects on
//!   any object store through object_store's `ObjectStore` trait; [`store::registry`] which
//!   settings apply to which table location, [`store::aws_credentials`] the AWS credential chain
//!   (profiles, assume-role, web identity, ECS, EC2; refreshed before expiry);
//!   [`store::iceberg_io`] iceberg-rust's `FileIO` over it; [`store::duckdb`] readies DuckDB for a
//!   table's data there (with [`store::secret`]); [`store::local`] what only a local file needs;
//!   [`store::table_root`] a table's root (what was named or registered, not what its metadata
//!   says): which store its files are read from, which directory its outputs stay under. A new
//!   store is one file here implementing [`store::StoreBackend`], plus its `pub mod` line and its
//!   entry in [`store::stores::STORES`] (`docs/layout.md`, "A new store").
//! - [`catalog`]: where a table's pointer lives: the [`catalog::Catalog`] trait (load, reload,
//!   swap the pointer or publish changes; in [`catalog::backend`], apart from the registry) and its registry [`catalog::KINDS`], keyed by the
//!   configured `type` ([`catalog::open`]); [`catalog::config`] reads pyiceberg's
//!   configuration, [`catalog::sql`] the sqlite SQL catalog (lookup and the conditional pointer
//!   move), [`catalog::rest`] the Iceberg REST client (vended credentials, commits under
//!   requirements; also S3 Tables and Glue's Iceberg endpoint), [`catalog::glue`] the AWS Glue
//!   Data Catalog (`GetTable`, `UpdateTable` under `VersionId`), [`catalog::sigv4`] SigV4 signing
//!   of catalog requests, [`catalog::pointer`] what a commit through a catalog comes to. A new
//!   catalog is one file here: a type implementing [`catalog::Catalog`] and its
//!   [`catalog::Kind`], plus its `pub mod` line and its entry in [`catalog::KINDS`].
//! - [`table`]: [`table::model`], the format-neutral model ([`table::DataFile`],
//!   [`table::PartitionKey`]) the formats produce and depend on; [`table::Table`], the opener
//!   (one variant per format, opened once per call, reloaded); [`table::locate`](mod@table::locate), where an Iceberg
//!   table's current metadata is; [`table::summary`], what a listing comes to per partition, and
//!   [`table::deleted_rows`], the deletion-vector bitmap both formats share;
//!   `table/not_a_table.rs` says what a directory that is not a table holds.
//!   [`table::iceberg`]: metadata and live files ([`table::iceberg::metadata`] parses the
//!   metadata files, [`table::iceberg::snapshot_builder`] is the one builder of a new snapshot
//!   every committer fills (its manifests, list and metadata; the pieces it writes with in
//!   [`table::iceberg::new_snapshot`]), [`table::iceberg::manifest`]
//!   decodes manifests as Java does (first row ids inherited), [`table::iceberg::manifest_reader`] and
//!   [`table::iceberg::list_reader`] are the lean streaming readers (on [`table::iceberg::avro`]),
//!   [`table::iceberg::inflate`] bounds every inflate of metadata (decompression bombs),
//!   [`table::iceberg::manifest_merge`] merges manifests by copying entries' bytes (written by
//!   [`table::iceberg::avro_writer`]), [`table::iceberg::tallies`]
//!   what their tallies give the planners (kept per table, manifests carried undecoded), [`table::iceberg::reach`]
//!   what many snapshots reference, [`table::iceberg::history`] whether the head descends from a
//!   snapshot read (a rebase's first check), [`table::iceberg::stand_in`] v3 types iceberg-rust lacks,
//!   [`table::iceberg::partition`] Java's partition labels, [`table::iceberg::deletion_vector`]
//!   v3 deletion vectors in Puffin files, [`table::iceberg::commit`] makes a metadata file
//!   current atomically). [`table::delta`]: the log through delta-rs (opened at
//!   [`table::delta::log_store`]'s URL),
//!   [`table::delta::commit`] (the log store our OPTIMIZE commits through),
//!   [`table::delta::deletion_vector`], [`table::delta::row_tracking`] and
//!   [`table::delta::domains`] (`delta.*` domains). A new format is a folder beside `iceberg/` and
//!   `delta/` that produces the model, and a variant of [`table::Table`] with its opening; a
//!   format feature's reading goes in its format's folder. [`spark`]: the Spark Connect client and partition predicates.
//! - [`profile`]: fragmentation figures per partition, the verdict (the planner's) and the summary
//!   row, from what the table lists; [`plan`]: pure planners (bin-packing, layouts, expiry
//!   reachability, [`plan::projection`] the projected scan speedup) and the checks of options
//!   against a table (a `partitions` value matching nothing, an option of the other format);
//!   [`report`]: the scorecard a gate run produces. [`notify`]: the Slack card and its delivery.
//! - [`action`]: executes plans. [`action::compact`] (the neutral flow in `run.rs`, committing in
//!   batches of partitions with a conflicted one re-planned and retried in `progress.rs` and
//!   `batches.rs` (partial progress), the Iceberg rewrite in `iceberg.rs` with its helpers named
//!   `iceberg_*.rs` (`iceberg_focus.rs`, which manifests it decodes; `iceberg_outputs.rs`, where
//!   its files go; `iceberg_nested_fields.rs`, files it would misread; `iceberg_nested_defaults.rs`,
//!   files lacking a nested field whose default it writes; `iceberg_commit.rs`, its
//!   snapshot through [`table::iceberg::snapshot_builder`]), `sql.rs` (v3 row lineage columns
//!   too), `deletes.rs`, `stats.rs`, column defaults in `defaults.rs`, the Delta rewrite in
//!   `delta.rs` with its helpers named `delta_*.rs` (`delta_columns.rs`, `delta_commit.rs`);
//!   `deletion_vectors.rs` serves both formats, and
//!   so does `stitch.rs`, which copies row groups byte for byte instead of re-encoding them); [`action::expire_snapshots`],
//!   [`action::remove_orphan_files`] and [`action::vacuum`] (all three delete through
//!   [`action::delete_files`], only inside [`action::boundary`], the table's root as named), [`action::rewrite_manifests`],
//!   [`action::rewrite_position_deletes`] (position deletes merged, or made deletion vectors), [`action::metadata_health`]
//!   (metadata-bloat figures from the other actions' dry plans; each format's measure in its
//!   `iceberg.rs` and `delta.rs`, as every verb both formats carry out is a folder),
//!   [`action::blocked`] (what maintenance a table blocks and why, from the checks the actions
//!   refuse by, which the read-only functions report), [`action::executor`] (the Spark
//!   hand-off; what it needs of a format is [`action::spark_rewrite`], Delta's OPTIMIZE
//!   [`action::executor::delta`]), [`action::gate`] (the whole gate: it opens the table once and
//!   reloads it after each step that committed; its steps' outcomes and the scorecard built from
//!   them in `gate/outcome.rs`). A file that carries out an SQL function is named after it.
//!   [`demo`] writes the demo table.
//! - [`functions`]: one file per SQL function, named after it (`compact_scalar.rs` and
//!   `expire_scalar.rs` are the scalar forms of `lakehouse_compact` and
//!   `lakehouse_expire_snapshots`), each an entry of [`functions::FUNCTIONS`], the one list
//!   [`functions::register`] registers; no function's file imports another's. They stand on
//!   a shared row-function adapter ([`functions::row_function`]) that parses arguments at bind
//!   and prefixes every error with the function's name, on [`functions::args`] (named
//!   arguments) and [`functions::json_options`] (a scalar's options JSON, its per-row body),
//!   and on [`functions::options`]: each verb's parameters and the one parser both its forms
//!   (and the gate and the server) read them with, through
//!   [`functions::options::source::OptionSource`]. [`functions::gate_runs`] holds the gate's rows
//!   (`scorecard_rows.rs`) and its run history (`history.rs`: Parquet files or a table, failed
//!   runs too), which the gate and the server share; `functions/serve/` holds `lakehouse_serve`
//!   and its webhook server (`state`, `auth`, `runs`, `http`, `signals`, `server`). A new
//!   function is its file here, its `pub mod` line and its entry in `FUNCTIONS`, its work in
//!   [`action`] (or lower), and its options in [`functions::options`] when another function
//!   shares them.
//! - `fuzz.rs` (test builds only): the fuzzer of every reader of bytes other programs wrote,
//!   seeded from `test/fuzz/corpus/` (`make fuzz`). The chaos harness, writers we did not write
//!   against our actions with kills, lives in `test/chaos/` (`make chaos`).

pub mod action;
pub mod catalog;
pub mod demo;
pub mod duck;
pub mod error;
pub mod functions;
#[cfg(test)]
mod fuzz;
pub mod interrupt;
pub mod notify;
pub mod plan;
pub mod profile;
pub mod progress_lines;
pub mod report;
pub mod runtime;
pub mod scheduler;
pub mod spark;
pub mod store;
pub mod table;

use std::error::Error as StdError;

/// Rust's allocations in this library (manifest decoding allocates and frees millions of small
/// values) go to mimalloc; DuckDB's own memory is untouched. Built with `local_dynamic_tls`: a
/// library that is `dlopen`ed (every DuckDB extension) must not use the static TLS block, which
/// a Python process that has loaded many libraries (pyarrow, dbt) may have used up.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The C API version the extension is built against and declares as its minimum: every
/// function it calls (through duckdb-rs for registration and vectors, through [`duck::Nested`]
/// for nested statements) is in that version's function table.
const MIN_DUCKDB_VERSION: &str = "v1.2.0";

/// Registers the extension's functions; called by DuckDB on `LOAD` (the entrypoint DuckDB
/// looks up as `<name>_init_c_api`). Written out rather than generated by duckdb-rs's macro so
/// that the nested connection is opened on the raw database handle.
///
/// # Safety
/// Called by DuckDB with its extension info and access table.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lakehouse_init_c_api(
    info: duckdb::ffi::duckdb_extension_info,
    access: *const duckdb::ffi::duckdb_extension_access,
) -> bool {
    // SAFETY: DuckDB passes a live info and access table.
    match unsafe { init(info, access) } {
        Ok(loaded) => loaded,
        Err(e) => {
            // SAFETY: as above; the message outlives the call.
            unsafe {
                if let Some(set_error) = (*access).set_error {
                    let message = std::ffi::CString::new(e.to_string())
                        .unwrap_or_else(|_| c"lakehouse: the extension failed to load".to_owned());
                    set_error(info, message.as_ptr());
                }
            }
            false
        }
    }
}

unsafe fn init(
    info: duckdb::ffi::duckdb_extension_info,
    access: *const duckdb::ffi::duckdb_extension_access,
) -> Result<bool, Box<dyn StdError>> {
    // SAFETY: per the caller.
    unsafe {
        if !duckdb::ffi::duckdb_rs_extension_api_init(info, access, MIN_DUCKDB_VERSION)? {
            return Ok(false);
        }
        let get_database = (*access).get_database.ok_or("DuckDB passed no get_database function")?;
        let db_ptr = get_database(info);
        if db_ptr.is_null() {
            return Ok(false);
        }
        let db: duckdb::ffi::duckdb_database = *db_ptr;
        let connection = duckdb::Connection::open_from_raw(db.cast())?;
        let host = duck::HostDb::new(duck::Nested::open(db)?, scheduler::TaskHelper::new(db));
        functions::register(&connection, host)?;
        Ok(true)
    }
}
