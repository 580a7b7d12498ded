//! The nested connection to the host database, and the only place SQL text is built.
//!
//! Data is written by DuckDB itself (`COPY … TO … (FORMAT parquet, RETURN_STATS)`) on a
//! connection to the same database the user loaded the extension into, so it obeys the
//! session's `threads` and `memory_limit` ([`Nested`] says how its results are read, on every
//! DuckDB version). Every identifier and literal that reaches SQL goes
//! through [`quote_ident`] or [`quote_literal`]; no raw user string is formatted into SQL.

pub mod secret_lease;

use std::ffi::{CStr, CString};
use std::sync::{Arc, Mutex, MutexGuard};

use duckdb::ffi;

use crate::error::{Error, ErrorKind, Result};

/// A handle on the host database, shared by every registered function.
///
/// It holds one connection opened at `LOAD` time. New connections cannot be opened later: the
/// database handle DuckDB passes to the entrypoint is valid only while the extension loads, so
/// calls take turns on this one connection.
#[derive(Clone)]
pub struct HostDb {
    root: Arc<Mutex<Nested>>,
    tasks: Option<Arc<crate::scheduler::TaskHelper>>,
    /// Temporary secrets whose lease ended, dropped before the connection is next released
    /// ([`secret_lease`]).
    ended_leases: Arc<Mutex<Vec<String>>>,
}

impl HostDb {
    /// Wraps a connection opened on the host database at `LOAD`, and the database's task
    /// scheduler ([`crate::scheduler`]; `None`: work runs on the calling thread alone).
    pub fn new(connection: Nested, tasks: Option<crate::scheduler::TaskHelper>) -> Self {
        Self {
            root: Arc::new(Mutex::new(connection)),
            tasks: tasks.map(Arc::new),
            ended_leases: Arc::new(Mutex::new(Vec::new())),
        }
    }

    /// Runs `work` on a thread of ours while the calling DuckDB thread executes DuckDB's queued
    /// tasks (the work's nested statements among them) — see [`crate::scheduler`].
    pub fn run_helped<T: Send>(&self, work: impl FnOnce() -> T + Send) -> Result<T> {
        match &self.tasks {
            Some(tasks) => tasks.run(work),
            None => Ok(work()),
        }
    }

    /// Exclusive use of the host connection until the guard drops, with every setting that
    /// changes what a statement means pinned on it ([`PINNED_SETTINGS`]).
    pub fn connect(&self) -> Result<Connection<'_>> {
        let guard = self.root.lock().map_err(|_| Error::new(ErrorKind::DuckDb, "host connection lock poisoned"))?;
        let connection = Connection { guard: std::mem::ManuallyDrop::new(guard), host: self };
        connection.pin_settings()?;
        Ok(connection)
    }
}

/// Exclusive use of the host connection ([`HostDb::connect`]); dereferences to the [`Nested`]
/// connection. Dropping it drops the temporary secrets whose lease ended meanwhile, then
/// releases the connection.
pub struct Connection<'a> {
    guard: std::mem::ManuallyDrop<MutexGuard<'a, Nested>>,
    host: &'a HostDb,
}

impl Connection<'_> {
    /// The host database this connection belongs to.
    pub fn host(&self) -> &HostDb {
        self.host
    }
}

impl std::ops::Deref for Connection<'_> {
    type Target = Nested;

    fn deref(&self) -> &Nested {
        &self.guard
    }
}

impl Drop for Connection<'_> {
    fn drop(&mut self) {
        drop_ended(&self.guard, &self.host.ended_leases);
        // SAFETY: the guard is dropped once, here, and not used after.
        unsafe { std::mem::ManuallyDrop::drop(&mut self.guard) };
        after_release(self.host);
    }
}

/// Drops the secrets whose lease ended, on `conn` (the connection, held).
fn drop_ended(conn: &Nested, ended: &Mutex<Vec<String>>) {
    let names = match ended.lock() {
        Ok(mut ended) => std::mem::take(&mut *ended),
        Err(_) => return,
    };
    for name in names {
        // Best effort: a secret that cannot be dropped is gone with the session.
        let _ = conn.execute(&format!("DROP TEMPORARY SECRET IF EXISTS {}", quote_ident(&name)));
    }
}

/// After the connection was released, or a lease ended: while secrets wait to be dropped and
/// the connection is free, takes it and drops them. When it is held, its holder does.
fn after_release(host: &HostDb) {
    loop {
        let waiting = host.ended_leases.lock().is_ok_and(|ended| !ended.is_empty());
        if !waiting {
            return;
        }
        let Ok(conn) = host.root.try_lock() else { return };
        drop_ended(&conn, &host.ended_leases);
    }
}

/// What holds a pinned setting ([`PINNED_SETTINGS`]) to its value when a DuckDB cannot set it
/// per session (DuckDB 1.3 sets `default_order`, `default_null_order`, `preserve_insertion_order`
/// and `old_implicit_casting` globally only) and the user's value differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Every statement of ours may depend on it: every call is refused, naming it.
    Always,
    /// Only writes in a layout's order do (rows keep an `ORDER BY` into the files only with
    /// insertion order preserved): sorted layouts are refused ([`Nested::require_ordered_writes`]).
    OrderedWrites,
    /// Our SQL says what it means explicitly (every `ORDER BY` term has its direction and null
    /// order), so the value does not matter; pinned for good measure.
    Explicit,
}

/// DuckDB settings that change what our SQL means, the value each is pinned to on our connection
/// in session scope (the user's own session keeps its values; a `SET GLOBAL` of the user's
/// reaches every connection but ours), and what depends on it. What the rewrite's comparisons and
/// casts must mean is the table format's: strings equal by their bytes (equality deletes,
/// position-delete paths, partition values, sort keys), instants in UTC (a TIMESTAMP read for a
/// TIMESTAMPTZ column, an hour or day partition), rows written in the `ORDER BY` they are
/// selected in, binary columns read as binary, `/` as division. `errors_as_json` comes first:
/// the others' errors are read as text. Settings that only tune speed or memory (`threads`,
/// `memory_limit`) are not pinned.
pub const PINNED_SETTINGS: &[(&str, &str, Need)] = &[
    ("errors_as_json", "false", Need::Always),
    ("default_collation", "''", Need::Always),
    ("TimeZone", "'UTC'", Need::Always),
    ("Calendar", "'gregorian'", Need::Always),
    ("default_order", "'ASC'", Need::Explicit),
    ("default_null_order", "'NULLS_LAST'", Need::Explicit),
    ("preserve_insertion_order", "true", Need::OrderedWrites),
    ("integer_division", "false", Need::Always),
    ("ieee_floating_point_ops", "true", Need::Always),
    ("binary_as_string", "false", Need::Always),
    ("old_implicit_casting", "false", Need::Always),
    ("order_by_non_integer_literal", "false", Need::Always),
    ("scalar_subquery_error_on_multiple_rows", "true", Need::Always),
    ("disable_timestamptz_casts", "false", Need::Always),
    ("preserve_identifier_case", "true", Need::Always),
    ("enable_geoparquet_conversion", "false", Need::Always),
    ("file_search_path", "''", Need::Always),
    ("validate_external_file_cache", "'VALIDATE_ALL'", Need::Always),
];

impl Nested {
    /// Pins [`PINNED_SETTINGS`] on this connection. A setting this DuckDB does not have is
    /// skipped (TimeZone and Calendar exist once ICU is loaded; without it instants are UTC).
    /// One that cannot be set in session scope here is accepted when its value already is the
    /// pinned one; otherwise, per its [`Need`], the call is refused naming it, or it is
    /// remembered for the statements that need it.
    fn pin_settings(&self) -> Result<()> {
        let mut unpinned = Vec::new();
        for (name, value, need) in PINNED_SETTINGS {
            let Err(e) = self.execute(&format!("SET SESSION {} = {value}", quote_ident(name))) else { continue };
            let message = e.message().to_ascii_lowercase();
            if message.contains("unrecognized configuration parameter") || message.contains("unrecognized option") {
                continue;
            }
            let same = self
                .query(&format!(
                    "SELECT lower(current_setting({})::VARCHAR) = lower(({value})::VARCHAR)",
                    quote_literal(name)
                ))
                .ok()
                .and_then(|r| r.rows.first().and_then(|row| row.first().cloned()));
            if same == Some(Value::Bool(true)) {
                continue;
            }
            let refusal = unpinnable(name, value, e.message());
            match need {
                Need::Always => return Err(Error::new(ErrorKind::Unsupported, refusal)),
                Need::OrderedWrites => unpinned.push(refusal),
                Need::Explicit => {}
            }
        }
        *self.unpinned.lock().map_err(|_| Error::new(ErrorKind::DuckDb, "host connection state poisoned"))? = unpinned;
        Ok(())
    }

    /// Refuses (naming the setting) when a setting writes in a layout's order depend on could not
    /// be pinned ([`Need::OrderedWrites`]).
    pub fn require_ordered_writes(&self) -> Result<()> {
        let unpinned =
            self.unpinned.lock().map_err(|_| Error::new(ErrorKind::DuckDb, "host connection state poisoned"))?;
        match unpinned.first() {
            Some(refusal) => Err(Error::new(ErrorKind::Unsupported, refusal.clone())),
            None => Ok(()),
        }
    }
}

/// Why a setting that could not be pinned, and differs from the pinned value, refuses a call.
fn unpinnable(name: &str, value: &str, why: &str) -> String {
    format!(
        "the DuckDB setting {name} changes what this extension's statements mean, and it cannot be reset to {value} \
         on the extension's own connection ({why}): SET {name} = {value} and run again"
    )
}

/// The nested connection, driven through DuckDB's C API functions of v1.2.0 only
/// (`duckdb_query`, `duckdb_fetch_chunk`, vectors and validity masks), which every host that
/// accepts the extension has. duckdb-rs reads results through Arrow functions newer than that
/// (`duckdb_result_get_arrow_options`: a host older than them hands out a shorter function table,
/// and calling past its end crashed DuckDB 1.3/1.4), and it converts every column of a result,
/// failing on types it does not know (the VARIANT column DuckDB 2.0's `COPY … RETURN_STATS`
/// returns). Here a result's columns are read by name, only BIGINT-like, BOOLEAN, DOUBLE and
/// VARCHAR values are decoded, and any other column is left alone ([`Value::Other`]).
pub struct Nested {
    con: ffi::duckdb_connection,
    /// Refusals for settings this DuckDB could not pin that some statements need
    /// ([`Nested::require_ordered_writes`]), as of the last [`HostDb::connect`].
    unpinned: Mutex<Vec<String>>,
}

// SAFETY: a DuckDB connection may be used from any thread, one statement at a time; HostDb's
// mutex serializes its use.
unsafe impl Send for Nested {}

/// One decoded value of a nested result.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// SQL NULL.
    Null,
    /// TINYINT … BIGINT, UTINYINT … UBIGINT (as far as it fits).
    Int(i64),
    /// BOOLEAN.
    Bool(bool),
    /// FLOAT, DOUBLE.
    Double(f64),
    /// VARCHAR.
    Text(String),
    /// A type this layer does not decode.
    Other,
}

/// A whole nested result: column names and rows.
#[derive(Debug, Clone, Default)]
pub struct Rows {
    /// Column names, in order.
    pub names: Vec<String>,
    /// The rows.
    pub rows: Vec<Vec<Value>>,
}

impl Rows {
    /// The index of column `name`.
    pub fn column(&self, name: &str) -> Result<usize> {
        self.names.iter().position(|n| n.eq_ignore_ascii_case(name)).ok_or_else(|| {
            Error::new(ErrorKind::DuckDb, format!("the result has no column '{name}' (columns: {:?})", self.names))
        })
    }

    /// (rows, bytes) of a `COPY … RETURN_STATS` result, read by column name (`count`,
    /// `file_size_bytes`): the other columns differ between DuckDB versions and are not decoded.
    pub fn copy_stats(&self) -> Result<(u64, u64)> {
        let row = self.first("COPY … RETURN_STATS")?;
        let count = row[self.column("count")?].int()?;
        let bytes = row[self.column("file_size_bytes")?].int()?;
        Ok((count.max(0) as u64, bytes.max(0) as u64))
    }

    /// The first row, or an error naming `what` returned nothing.
    pub fn first(&self, what: &str) -> Result<&[Value]> {
        self.rows
            .first()
            .map(Vec::as_slice)
            .ok_or_else(|| Error::new(ErrorKind::DuckDb, format!("{what} returned no row")))
    }
}

impl Value {
    /// The integer, or an error.
    pub fn int(&self) -> Result<i64> {
        match self {
            Value::Int(v) => Ok(*v),
            other => Err(Error::new(ErrorKind::DuckDb, format!("expected an integer, got {other:?}"))),
        }
    }

    /// The integer, `None` for NULL.
    pub fn opt_int(&self) -> Result<Option<i64>> {
        match self {
            Value::Null => Ok(None),
            v => v.int().map(Some),
        }
    }

    /// The text, `None` for NULL or another type.
    pub fn text(&self) -> Option<&str> {
        match self {
            Value::Text(s) => Some(s),
            _ => None,
        }
    }

    /// The boolean, or an error.
    pub fn bool(&self) -> Result<bool> {
        match self {
            Value::Bool(v) => Ok(*v),
            other => Err(Error::new(ErrorKind::DuckDb, format!("expected a boolean, got {other:?}"))),
        }
    }
}

impl Nested {
    /// Opens a connection on `db` (the handle DuckDB passes to the entrypoint).
    ///
    /// # Safety
    /// `db` must be a live database handle.
    pub unsafe fn open(db: ffi::duckdb_database) -> Result<Self> {
        let mut con: ffi::duckdb_connection = std::ptr::null_mut();
        // SAFETY: per the caller; `con` is written by DuckDB.
        let state = unsafe { ffi::duckdb_connect(db, &mut con) };
        if state != ffi::duckdb_state_DuckDBSuccess || con.is_null() {
            return Err(Error::new(ErrorKind::DuckDb, "cannot open a connection to the host database"));
        }
        Ok(Self { con, unpinned: Mutex::new(Vec::new()) })
    }

    /// Runs `sql` and returns its whole result.
    pub fn query(&self, sql: &str) -> Result<Rows> {
        let c_sql = CString::new(sql).map_err(|_| Error::invalid("a statement contains a NUL byte"))?;
        // SAFETY: `result` is initialised by duckdb_query and destroyed once below; chunks are
        // destroyed after their values are copied out; vectors are read within their chunk's size.
        unsafe {
            let mut result: ffi::duckdb_result = std::mem::zeroed();
            if ffi::duckdb_query(self.con, c_sql.as_ptr(), &mut result) != ffi::duckdb_state_DuckDBSuccess {
                let message = cstr(ffi::duckdb_result_error(&mut result)).unwrap_or_else(|| "query failed".into());
                ffi::duckdb_destroy_result(&mut result);
                return Err(Error::new(ErrorKind::DuckDb, message));
            }
            let columns = ffi::duckdb_column_count(&mut result);
            let mut out = Rows::default();
            let mut types = Vec::new();
            for c in 0..columns {
                out.names.push(cstr(ffi::duckdb_column_name(&mut result, c)).unwrap_or_default());
                types.push(ffi::duckdb_column_type(&mut result, c));
            }
            loop {
                let mut chunk = ffi::duckdb_fetch_chunk(result);
                if chunk.is_null() {
                    break;
                }
                let size = ffi::duckdb_data_chunk_get_size(chunk);
                if size == 0 {
                    ffi::duckdb_destroy_data_chunk(&mut chunk);
                    break;
                }
                let base = out.rows.len();
                out.rows.extend((0..size).map(|_| Vec::with_capacity(types.len())));
                for (c, ty) in types.iter().enumerate() {
                    let vector = ffi::duckdb_data_chunk_get_vector(chunk, c as ffi::idx_t);
                    let data = ffi::duckdb_vector_get_data(vector);
                    let validity = ffi::duckdb_vector_get_validity(vector);
                    for r in 0..size {
                        let valid = validity.is_null() || ffi::duckdb_validity_row_is_valid(validity, r);
                        let value = if valid { decode(*ty, data, r as usize) } else { Value::Null };
                        out.rows[base + r as usize].push(value);
                    }
                }
                ffi::duckdb_destroy_data_chunk(&mut chunk);
            }
            ffi::duckdb_destroy_result(&mut result);
            Ok(out)
        }
    }

    /// Runs `sql`, ignoring any result.
    pub fn execute(&self, sql: &str) -> Result<()> {
        self.query(sql).map(|_| ())
    }
}

/// The C string at `ptr`, if any.
unsafe fn cstr(ptr: *const std::os::raw::c_char) -> Option<String> {
    // SAFETY: DuckDB returns NUL-terminated strings that live as long as the result.
    (!ptr.is_null()).then(|| unsafe { CStr::from_ptr(ptr) }.to_string_lossy().into_owned())
}

/// Row `row` of a vector's data of DuckDB type `ty`.
unsafe fn decode(ty: ffi::DUCKDB_TYPE, data: *mut std::ffi::c_void, row: usize) -> Value {
    // SAFETY: the caller passes a vector's data of type `ty` and a row within its chunk.
    unsafe {
        match ty {
            ffi::DUCKDB_TYPE_DUCKDB_TYPE_BOOLEAN => Value::Bool(*(data as *const bool).add(row)),
            ffi::DUCKDB_TYPE_DUCKDB_TYPE_TINYINT => Value::Int(i64::from(*(data as *const i8).add(row))),
            ffi::DUCKDB_TYPE_DUCKDB_TYPE_SMALLINT => Value::Int(i64::from(*(data as *const i16).add(row))),
            ffi::DUCKDB_TYPE_DUCKDB_TYPE_INTEGER => Value::Int(i64::from(*(data as *const i32).add(row))),
            ffi::DUCKDB_TYPE_DUCKDB_TYPE_BIGINT => Value::Int(*(data as *const i64).add(row)),
            ffi::DUCKDB_TYPE_DUCKDB_TYPE_UTINYINT => Value::Int(i64::from(*(data as *const u8).add(row))),
            ffi::DUCKDB_TYPE_DUCKDB_TYPE_USMALLINT => Value::Int(i64::from(*(data as *const u16).add(row))),
            ffi::DUCKDB_TYPE_DUCKDB_TYPE_UINTEGER => Value::Int(i64::from(*(data as *const u32).add(row))),
            ffi::DUCKDB_TYPE_DUCKDB_TYPE_UBIGINT => {
                i64::try_from(*(data as *const u64).add(row)).map_or(Value::Other, Value::Int)
            }
            ffi::DUCKDB_TYPE_DUCKDB_TYPE_FLOAT => Value::Double(f64::from(*(data as *const f32).add(row))),
            ffi::DUCKDB_TYPE_DUCKDB_TYPE_DOUBLE => Value::Double(*(data as *const f64).add(row)),
            ffi::DUCKDB_TYPE_DUCKDB_TYPE_VARCHAR => {
                let s = &*(data as *const ffi::duckdb_string_t).add(row);
                let len = s.value.inlined.length as usize;
                let bytes: &[u8] = if len <= 12 {
                    std::slice::from_raw_parts(s.value.inlined.inlined.as_ptr() as *const u8, len)
                } else {
                    std::slice::from_raw_parts(s.value.pointer.ptr as *const u8, len)
                };
                Value::Text(String::from_utf8_lossy(bytes).into_owned())
            }
            _ => Value::Other,
        }
    }
}

/// `"name"` with embedded quotes doubled.
pub fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// `'text'` with embedded quotes doubled.
pub fn quote_literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// `'path'` naming exactly the file `path` to DuckDB's file readers (`read_parquet`,
/// `parquet_schema`, `parquet_metadata`, …), which take their argument as a glob pattern and
/// expand a leading `~` to the home directory: `*`, `?` and `[` are escaped as the one-character
/// classes `[*]`, `[?]`, `[[]` (DuckDB's pattern syntax has no other escape; a pattern without
/// another glob character matches only the file named), and a leading `~` as `[~]`. The file
/// name DuckDB reports (`filename`, `file_name`) is `path` as given. For reading only: `COPY … TO`
/// takes its target literally, through [`quote_literal`]. On object storage a pattern is
/// answered by listing, so paths there with these characters are refused before they get here
/// (`crate::store::TableRoot::check_read`).
pub fn quote_file(path: &str) -> String {
    let mut escaped = String::with_capacity(path.len() + 2);
    for (i, c) in path.chars().enumerate() {
        match c {
            '*' | '?' | '[' => {
                escaped.push('[');
                escaped.push(c);
                escaped.push(']');
            }
            '~' if i == 0 => escaped.push_str("[~]"),
            _ => escaped.push(c),
        }
    }
    quote_literal(&escaped)
}

/// `['a', 'b']`: a DuckDB list literal of files to read, each through [`quote_file`].
pub fn quote_files<S: AsRef<str>>(paths: &[S]) -> String {
    format!("[{}]", paths.iter().map(|p| quote_file(p.as_ref())).collect::<Vec<_>>().join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_doubles_quotes() {
        assert_eq!(quote_ident("a\"b"), "\"a\"\"b\"");
        assert_eq!(quote_literal("it's"), "'it''s'");
        assert_eq!(quote_literal("x'); DROP TABLE t; --"), "'x''); DROP TABLE t; --'");
    }

    #[test]
    fn files_to_read_are_quoted_without_glob_meaning() {
        let cases = [
            ("/t/data/a.parquet", "'/t/data/a.parquet'"),
            ("/v/part-[12].parquet", "'/v/part-[[]12].parquet'"),
            ("/v/*.parquet", "'/v/[*].parquet'"),
            ("/v/**/x?.parquet", "'/v/[*][*]/x[?].parquet'"),
            ("~/secret.parquet", "'[~]/secret.parquet'"),
            ("/home/~x/a.parquet", "'/home/~x/a.parquet'"),
            ("/t/it's.parquet", "'/t/it''s.parquet'"),
            ("s3://b/k/a.parquet", "'s3://b/k/a.parquet'"),
        ];
        for (path, want) in cases {
            assert_eq!(quote_file(path), want, "{path}");
        }
        assert_eq!(quote_files(&["/a[1]", "/b"]), "['/a[[]1]', '/b']");
    }

    /// A tripwire for the rule that every file a statement of ours reads goes through
    /// [`quote_file`]: a `format!` that calls `read_parquet`, `parquet_schema`, `parquet_metadata`
    /// (…) and quotes with [`quote_literal`] but never with [`quote_file`] or [`quote_files`] is
    /// refused (a glob pattern or `~` of a table's writer would be expanded), and so is the old
    /// list form `quote_list`. File lists built before the `format!` are not seen by it.
    #[test]
    fn no_file_reader_is_given_a_plain_literal() {
        let readers = ["read_parquet(", "parquet_schema(", "parquet_metadata(", "parquet_file_metadata(", "read_blob("];
        let mut offenders = Vec::new();
        let mut stack = vec![std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/src"))];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    stack.push(path);
                    continue;
                }
                if path.extension().is_none_or(|e| e != "rs") || path.ends_with("duck.rs") {
                    continue;
                }
                let text = std::fs::read_to_string(&path).unwrap();
                // A statement: from a `format!(`/`query(` to the next `;` (enough for ours).
                for (at, _) in text.match_indices("format!(") {
                    let statement = &text[at..text[at..].find(';').map_or(text.len(), |end| at + end)];
                    let quotes_files = statement.contains("quote_file(") || statement.contains("quote_files(");
                    if readers.iter().any(|r| statement.contains(r))
                        && !quotes_files
                        && (statement.contains("quote_literal(") || statement.contains("quote_list("))
                    {
                        offenders.push(format!("{}: {}", path.display(), statement.lines().next().unwrap_or("")));
                    }
                }
            }
        }
        assert!(offenders.is_empty(), "file readers given a plain literal:\n{}", offenders.join("\n"));
    }
}
