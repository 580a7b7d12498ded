//! Reading SQL arguments at bind time into typed values, with errors that name the parameter.
//!
//! Named parameters are declared `ANY` so that a wrong type reaches us (and gets a message that
//! names the function and the parameter) instead of failing in DuckDB's binder with a generic
//! cast error.

use duckdb::core::{LogicalTypeHandle, LogicalTypeId};
use duckdb::vtab::{BindInfo, Value};

use crate::error::{Error, Result};

/// The named parameters every function that takes a `table` accepts.
pub const TABLE_PARAMETERS: [&str; 4] = ["latest_metadata", "catalog", "catalog_uri", "warehouse"];

/// The verdict's named parameters (see [`super::options::source::OptionSource::thresholds`]).
pub const THRESHOLD_PARAMETERS: [&str; 2] = ["small_file_threshold_mb", "fragmentation_ratio_threshold"];

/// `ANY`, the declared type of every named parameter.
pub fn any() -> LogicalTypeHandle {
    LogicalTypeHandle::from(LogicalTypeId::Any)
}

/// Named parameters `names`, each declared `ANY`.
pub fn named(names: &[&str]) -> Vec<(String, LogicalTypeHandle)> {
    names.iter().map(|n| (n.to_string(), any())).collect()
}

/// Typed access to a table function's arguments.
pub struct Args<'a> {
    bind: &'a BindInfo,
}

fn is_numeric(id: LogicalTypeId) -> bool {
    use LogicalTypeId::*;
    matches!(
        id,
        Tinyint
            | Smallint
            | Integer
            | Bigint
            | UTinyint
            | USmallint
            | UInteger
            | UBigint
            | Float
            | Double
            | Decimal
            | Hugeint
            | UHugeint
    )
}

fn is_integer(id: LogicalTypeId) -> bool {
    use LogicalTypeId::*;
    matches!(id, Tinyint | Smallint | Integer | Bigint | UTinyint | USmallint | UInteger | UBigint | Hugeint | UHugeint)
}

impl<'a> Args<'a> {
    /// Wraps the bind info.
    pub fn new(bind: &'a BindInfo) -> Self {
        Self { bind }
    }

    /// Positional VARCHAR argument `index` (declared `ANY`), named `name` in messages; NULL,
    /// non-text and '' are refused.
    pub fn required_string(&self, index: u64, name: &str) -> Result<String> {
        let value = self.bind.get_parameter(index);
        if value.is_null() {
            return Err(Error::invalid(format!("{name} must not be NULL")));
        }
        let id = value.logical_type_id();
        if id != LogicalTypeId::Varchar {
            return Err(Error::invalid(format!("{name} must be a VARCHAR, got {} '{value}'", type_name(id))));
        }
        let text = value.to_string();
        if text.trim().is_empty() {
            return Err(Error::invalid(format!("{name} must not be empty")));
        }
        Ok(text)
    }

    /// Whether named parameter `name` was given a value (present and not NULL).
    pub fn given(&self, name: &str) -> bool {
        self.named_value(name).is_some_and(|v| !v.is_null())
    }

    fn named_value(&self, name: &str) -> Option<Value> {
        self.bind.get_named_parameter(name)
    }

    /// A numeric named parameter; `default` when absent. NULL and non-numbers are refused.
    pub fn f64(&self, name: &str, default: f64) -> Result<f64> {
        Ok(self.opt_f64(name)?.unwrap_or(default))
    }

    /// A numeric named parameter; `None` when absent. NULL and non-numbers are refused.
    pub fn opt_f64(&self, name: &str) -> Result<Option<f64>> {
        let Some(value) = self.named_value(name) else { return Ok(None) };
        if value.is_null() {
            return Err(Error::invalid(format!("{name} must not be NULL")));
        }
        let id = value.logical_type_id();
        if !is_numeric(id) {
            return Err(Error::invalid(format!("{name} must be a number, got {} '{value}'", type_name(id))));
        }
        let number = value.to_double();
        if number.is_nan() {
            return Err(Error::invalid(format!("{name} must be a number, got NaN")));
        }
        Ok(Some(number))
    }

    /// An integer named parameter in `min..=max`; `default` when absent.
    pub fn i64_in(&self, name: &str, default: i64, min: i64, max: i64) -> Result<i64> {
        Ok(self.opt_i64_in(name, min, max)?.unwrap_or(default))
    }

    /// An integer named parameter in `min..=max`; `None` when absent.
    pub fn opt_i64_in(&self, name: &str, min: i64, max: i64) -> Result<Option<i64>> {
        let Some(value) = self.named_value(name) else { return Ok(None) };
        if value.is_null() {
            return Err(Error::invalid(format!("{name} must not be NULL")));
        }
        let id = value.logical_type_id();
        if !is_integer(id) {
            return Err(Error::invalid(format!("{name} must be an integer, got {} '{value}'", type_name(id))));
        }
        let number = value.to_int64();
        if !(min..=max).contains(&number) {
            return Err(Error::invalid(format!("{name} must be between {min} and {max}, got {value}")));
        }
        Ok(Some(number))
    }

    /// A BOOLEAN named parameter; `default` when absent.
    pub fn bool(&self, name: &str, default: bool) -> Result<bool> {
        let Some(value) = self.named_value(name) else { return Ok(default) };
        if value.is_null() {
            return Err(Error::invalid(format!("{name} must not be NULL")));
        }
        let id = value.logical_type_id();
        if id != LogicalTypeId::Boolean {
            return Err(Error::invalid(format!("{name} must be a BOOLEAN, got {} '{value}'", type_name(id))));
        }
        Ok(value.to_bool())
    }

    /// An optional VARCHAR named parameter (absent or NULL → None). `secret` keeps the value out
    /// of messages.
    pub fn opt_string(&self, name: &str, secret: bool) -> Result<Option<String>> {
        let Some(value) = self.named_value(name) else { return Ok(None) };
        if value.is_null() {
            return Ok(None);
        }
        let id = value.logical_type_id();
        if id != LogicalTypeId::Varchar {
            let shown = if secret { String::new() } else { format!(" '{value}'") };
            return Err(Error::invalid(format!("{name} must be a VARCHAR, got {}{shown}", type_name(id))));
        }
        Ok(Some(value.to_string()))
    }

    /// An optional LIST of VARCHAR named parameter (absent or NULL → None).
    pub fn opt_string_list(&self, name: &str) -> Result<Option<Vec<String>>> {
        let Some(value) = self.named_value(name) else { return Ok(None) };
        if value.is_null() {
            return Ok(None);
        }
        let id = value.logical_type_id();
        let Some(items) = value.to_list() else {
            return Err(Error::invalid(format!("{name} must be a LIST of VARCHAR, got {}", type_name(id))));
        };
        items
            .iter()
            .map(|item| {
                if item.is_null() || item.logical_type_id() != LogicalTypeId::Varchar {
                    Err(Error::invalid(format!("{name} must be a LIST of non-NULL VARCHAR values")))
                } else {
                    Ok(item.to_string())
                }
            })
            .collect::<Result<Vec<_>>>()
            .map(Some)
    }
}

fn type_name(id: LogicalTypeId) -> String {
    format!("{id:?}").to_uppercase()
}
