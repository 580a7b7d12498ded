//! Options of the scalar functions: a JSON object of the table function's named parameters,
//! refused whole when it names an unknown one, then read key by key through
//! [`super::options::source::OptionSource`] with messages that name the option; and the per-row body
//! and signatures every `(table [, options_json])` scalar shares.

use duckdb::core::{DataChunkHandle, Inserter, LogicalTypeHandle, LogicalTypeId};
use duckdb::types::DuckString;
use duckdb::vscalar::{ScalarFunctionSignature, VScalar};
use duckdb::vtab::arrow::WritableVector;
use serde_json::{Map, Value, json};

use crate::duck::HostDb;
use crate::error::{Error, ErrorKind, Result};

/// A `(table [, options_json]) → JSON` scalar (or another on the host database), registered
/// under its SQL function's name.
pub trait NamedScalar: VScalar<State = HostDb> {
    /// The SQL function's name.
    const NAME: &'static str;
}

/// A parsed options object.
pub struct JsonOptions {
    map: Map<String, Value>,
}

impl JsonOptions {
    /// Parses `text` (absent or NULL → no options) and refuses keys outside `known`.
    pub fn parse(text: Option<&str>, known: &[&str]) -> Result<Self> {
        let map = match text {
            None => Map::new(),
            Some(text) => match serde_json::from_str::<Value>(text) {
                Ok(Value::Object(map)) => map,
                Ok(other) => return Err(Error::invalid(format!("options must be a JSON object, got {other}"))),
                Err(e) => return Err(Error::invalid(format!("options are not valid JSON: {e}"))),
            },
        };
        if let Some(unknown) = map.keys().find(|k| !known.contains(&k.as_str())) {
            return Err(Error::invalid(format!("unknown option '{unknown}'; known options: {}", known.join(", "))));
        }
        Ok(Self { map })
    }

    /// The raw value of `key` (read typed through [`super::options::source::OptionSource`]).
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.map.get(key)
    }
}

/// The VARCHAR at (`column`, `row`) of a scalar's input chunk; `None` for NULL.
pub fn read_text(input: &DataChunkHandle, column: usize, row: usize) -> Option<String> {
    let vector = input.flat_vector(column);
    if vector.row_is_null(row as u64) {
        return None;
    }
    let strings = unsafe { vector.as_slice_with_len::<duckdb::ffi::duckdb_string_t>(input.len()) };
    let mut raw = strings[row];
    Some(DuckString::new(&mut raw).as_str().into_owned())
}

/// The body of every `(table [, options_json]) → JSON` scalar: for each row, `run(table,
/// options)` and write its JSON, with `"error": null`. A row that fails — a table that is not
/// one, bad options, a conflict — gets `{"table": …, "error": "<name>: …"}` and the rows after it
/// still run, so one bad row never loses what the others committed. A NULL table or options
/// gives NULL and runs nothing (DuckDB itself skips a call whose argument is a literal NULL:
/// both NULLs behave alike). Only Ctrl-C fails the query, naming the rows that finished before.
pub fn invoke_per_row(
    name: &str,
    input: &mut DataChunkHandle,
    output: &mut dyn WritableVector,
    run: impl Fn(&str, Option<&str>) -> Result<Value>,
) -> std::result::Result<(), Box<dyn std::error::Error>> {
    let with_options = input.num_columns() > 1;
    let mut out = output.flat_vector();
    let _interrupts = crate::interrupt::Guard::new();
    let mut finished: Vec<String> = Vec::new();
    for row in 0..input.len() {
        let (Some(table), Some(options)) =
            (read_text(input, 0, row), if with_options { read_text(input, 1, row).map(Some) } else { Some(None) })
        else {
            out.set_null(row);
            continue;
        };
        let outcome = crate::interrupt::check("nothing more was run").and_then(|()| run(&table, options.as_deref()));
        let summary = match outcome {
            Ok(mut summary) => {
                if let Value::Object(map) = &mut summary {
                    map.insert("error".into(), Value::Null);
                }
                summary
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {
                let before = match finished.is_empty() {
                    true => String::new(),
                    false => format!(
                        "; the rows before it ran to the end, and what they committed stands: {}",
                        finished.join(", ")
                    ),
                };
                return Err(format!("{name}: {e} (table '{table}'){before}").into());
            }
            Err(e) => json!({"table": table, "error": format!("{name}: {e}")}),
        };
        finished.push(format!("'{table}'"));
        out.insert(row, summary.to_string().as_str());
    }
    Ok(())
}

/// `(VARCHAR) → VARCHAR` and `(VARCHAR, VARCHAR) → VARCHAR`.
pub fn table_and_options_signatures() -> Vec<ScalarFunctionSignature> {
    let text = || LogicalTypeHandle::from(LogicalTypeId::Varchar);
    vec![
        ScalarFunctionSignature::exact(vec![text()], text()),
        ScalarFunctionSignature::exact(vec![text(), text()], text()),
    ]
}
