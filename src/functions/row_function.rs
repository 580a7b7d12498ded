//! The machinery every row-returning table function shares ([`RowFunction`]): it parses its
//! arguments at bind into a typed `Input` (errors are prefixed with the function's name), does
//! its work once per execution at init, and returns rows that `emit` copies into DuckDB's output
//! chunks. Work happens at init, not bind, so `DESCRIBE` or a prepared statement never touches a
//! table.

use std::marker::PhantomData;
use std::sync::Mutex;

use duckdb::core::{DataChunkHandle, Inserter, LogicalTypeHandle, LogicalTypeId};
use duckdb::vtab::{BindInfo, InitInfo, TableFunctionInfo, VTab};

use super::args::{self, Args};
use crate::duck::HostDb;
use crate::error::Result;

/// One output value.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    /// VARCHAR
    Text(String),
    /// BIGINT
    BigInt(i64),
    /// INTEGER
    Int(i32),
    /// DOUBLE
    Double(f64),
    /// BOOLEAN
    Bool(bool),
    /// TIMESTAMP, microseconds since the epoch
    Timestamp(i64),
    /// NULL of the column's type
    Null,
}

/// A row-returning table function.
pub trait RowFunction: 'static {
    /// The SQL name, also the prefix of every error message.
    const NAME: &'static str;
    /// Arguments parsed at bind.
    type Input: Send + Sync;
    /// Positional parameter types: by default one, the table (or path), declared `ANY` so that
    /// [`args::Args::required_string`] can name the function in a type error.
    fn parameters() -> Vec<LogicalTypeHandle> {
        vec![args::any()]
    }
    /// Named parameters (declared `ANY`, checked in [`RowFunction::parse`]).
    fn named_parameters() -> Vec<(String, LogicalTypeHandle)>;
    /// Output columns. A `Struct` column takes its fields from [`RowFunction::struct_fields`]
    /// and one cell per field in a row (all `Null`: the struct is NULL).
    fn columns() -> Vec<(&'static str, LogicalTypeId)>;
    /// The fields of the `Struct` column `column` (none by default).
    fn struct_fields(_column: &str) -> Vec<(&'static str, LogicalTypeId)> {
        Vec::new()
    }
    /// Reads and validates the arguments.
    fn parse(args: &Args) -> Result<Self::Input>;
    /// Does the work and returns the rows, in column order.
    fn run(input: &Self::Input, host: &HostDb) -> Result<Vec<Vec<Cell>>>;
    /// Whether the work can be long (rewrites, deletes): then the function takes
    /// `progress := true`, which prints what it finished to stderr as it goes
    /// ([`crate::progress_lines`]).
    const LONG: bool = false;
}

/// The named parameter of a [`RowFunction::LONG`] function that turns progress lines on.
pub const PROGRESS_PARAMETER: &str = "progress";

/// Adapts a [`RowFunction`] to duckdb-rs's [`VTab`].
pub struct Table<F>(PhantomData<F>);

/// Bind data: the parsed input.
pub struct Bound<I> {
    input: I,
    /// `progress := true` ([`RowFunction::LONG`] functions only).
    progress: bool,
}

/// Init data: the rows and how many were emitted.
pub struct Produced {
    rows: Vec<Vec<Cell>>,
    next: Mutex<usize>,
}

fn prefixed(name: &str, err: impl std::fmt::Display) -> Box<dyn std::error::Error> {
    format!("{name}: {err}").into()
}

impl<F: RowFunction> VTab for Table<F> {
    type BindData = Bound<F::Input>;
    type InitData = Produced;

    fn bind(bind: &BindInfo) -> std::result::Result<Self::BindData, Box<dyn std::error::Error>> {
        for (name, ty) in F::columns() {
            let handle = match ty {
                LogicalTypeId::Struct => {
                    let fields: Vec<(&str, LogicalTypeHandle)> =
                        F::struct_fields(name).into_iter().map(|(f, t)| (f, LogicalTypeHandle::from(t))).collect();
                    LogicalTypeHandle::struct_type(&fields)
                }
                other => LogicalTypeHandle::from(other),
            };
            bind.add_result_column(name, handle);
        }
        let args = Args::new(bind);
        let input = F::parse(&args).map_err(|e| prefixed(F::NAME, e))?;
        let progress = F::LONG && args.bool(PROGRESS_PARAMETER, false).map_err(|e| prefixed(F::NAME, e))?;
        Ok(Bound { input, progress })
    }

    fn init(init: &InitInfo) -> std::result::Result<Self::InitData, Box<dyn std::error::Error>> {
        let bound = unsafe { &*init.get_bind_data::<Self::BindData>() };
        let host_ptr = init.get_extra_info::<HostDb>();
        if host_ptr.is_null() {
            return Err(prefixed(F::NAME, "the extension was registered without its host database"));
        }
        let host = unsafe { &*host_ptr };
        let rows = {
            let _interrupts = crate::interrupt::Guard::new();
            // On a thread of ours, with this one executing DuckDB's tasks meanwhile (whichever
            // thread DuckDB gave the init, all of its threads work on the nested statements).
            let work = || {
                let _lines = crate::progress_lines::enable(F::NAME, bound.progress);
                F::run(&bound.input, host)
            };
            host.run_helped(work).and_then(|r| r).map_err(|e| prefixed(F::NAME, e))?
        };
        Ok(Produced { rows, next: Mutex::new(0) })
    }

    fn func(
        func: &TableFunctionInfo<Self>,
        output: &mut DataChunkHandle,
    ) -> std::result::Result<(), Box<dyn std::error::Error>> {
        let produced = func.get_init_data();
        let mut next = produced.next.lock().map_err(|_| prefixed(F::NAME, "output cursor poisoned"))?;
        let widths: Vec<usize> = F::columns()
            .iter()
            .map(|(name, ty)| if *ty == LogicalTypeId::Struct { F::struct_fields(name).len() } else { 1 })
            .collect();
        let written = emit(&produced.rows[*next..], &widths, output);
        *next += written;
        Ok(())
    }

    fn parameters() -> Option<Vec<LogicalTypeHandle>> {
        Some(F::parameters())
    }

    fn named_parameters() -> Option<Vec<(String, LogicalTypeHandle)>> {
        let mut named = F::named_parameters();
        if F::LONG {
            named.push((PROGRESS_PARAMETER.to_string(), args::any()));
        }
        Some(named)
    }
}

/// Copies up to one chunk of `rows` into `output`; returns how many were copied. `widths` gives
/// each column's cells in a row: 1, or a struct column's field count.
fn emit(rows: &[Vec<Cell>], widths: &[usize], output: &mut DataChunkHandle) -> usize {
    let count = rows.len().min(2048);
    let mut first = 0;
    for (column, &width) in widths.iter().enumerate().take(output.num_columns()) {
        if width == 1 {
            let mut vector = output.flat_vector(column);
            for (i, row) in rows[..count].iter().enumerate() {
                put(&mut vector, i, &row[first]);
            }
        } else {
            let mut parent = output.struct_vector(column);
            for field in 0..width {
                let mut vector = parent.child(field, count);
                for (i, row) in rows[..count].iter().enumerate() {
                    put(&mut vector, i, &row[first + field]);
                }
            }
            for (i, row) in rows[..count].iter().enumerate() {
                if row[first..first + width].iter().all(|c| *c == Cell::Null) {
                    parent.set_null(i);
                }
            }
        }
        first += width;
    }
    output.set_len(count);
    count
}

/// Writes `cell` at row `i` of `vector`.
fn put(vector: &mut duckdb::core::FlatVector, i: usize, cell: &Cell) {
    match cell {
        Cell::Text(s) => vector.insert(i, s.as_str()),
        Cell::BigInt(v) => unsafe { vector.as_mut_slice::<i64>()[i] = *v },
        Cell::Int(v) => unsafe { vector.as_mut_slice::<i32>()[i] = *v },
        Cell::Double(v) => unsafe { vector.as_mut_slice::<f64>()[i] = *v },
        Cell::Bool(v) => unsafe { vector.as_mut_slice::<bool>()[i] = *v },
        Cell::Timestamp(v) => unsafe { vector.as_mut_slice::<i64>()[i] = *v },
        Cell::Null => vector.set_null(i),
    }
}
