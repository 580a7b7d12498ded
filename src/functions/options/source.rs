//! Where a function's options come from: a table function's named arguments ([`Args`]) or a
//! scalar's options JSON ([`JsonOptions`]). A verb's parser reads its options through
//! [`OptionSource`] once, so its table-function and scalar forms cannot drift; each source
//! words its own errors (a named argument's SQL type, a JSON value).

use serde_json::Value;

use crate::catalog::CatalogOptions;
use crate::error::{Error, Result};
use crate::functions::args::Args;
use crate::functions::json_options::JsonOptions;
use crate::profile::Thresholds;
use crate::table::LocateOptions;

/// Typed, validated reads of options by name.
pub trait OptionSource {
    /// Whether `name` was given a value (present and not NULL/null).
    fn given(&self, name: &str) -> bool;

    /// A number; `None` when absent.
    fn opt_f64(&self, name: &str) -> Result<Option<f64>>;

    /// An integer in `min..=max`; `None` when absent.
    fn opt_i64_in(&self, name: &str, min: i64, max: i64) -> Result<Option<i64>>;

    /// A boolean; `default` when absent.
    fn bool(&self, name: &str, default: bool) -> Result<bool>;

    /// A string; `None` when absent or NULL. `secret` keeps the value out of messages.
    fn opt_string(&self, name: &str, secret: bool) -> Result<Option<String>>;

    /// A list of strings; `None` when absent or NULL.
    fn opt_string_list(&self, name: &str) -> Result<Option<Vec<String>>>;

    /// A number; `default` when absent.
    fn f64(&self, name: &str, default: f64) -> Result<f64> {
        Ok(self.opt_f64(name)?.unwrap_or(default))
    }

    /// An integer in `min..=max`; `default` when absent.
    fn i64_in(&self, name: &str, default: i64, min: i64, max: i64) -> Result<i64> {
        Ok(self.opt_i64_in(name, min, max)?.unwrap_or(default))
    }

    /// The verdict thresholds of [`crate::functions::args::THRESHOLD_PARAMETERS`] (defaults 64
    /// MiB and 0.35), validated.
    fn thresholds(&self) -> Result<Thresholds> {
        Thresholds::new(self.f64("small_file_threshold_mb", 64.0)?, self.f64("fragmentation_ratio_threshold", 0.35)?)
    }

    /// The options of [`crate::functions::args::TABLE_PARAMETERS`].
    fn locate_options(&self) -> Result<LocateOptions> {
        Ok(LocateOptions {
            latest_metadata: self.bool("latest_metadata", false)?,
            catalog: CatalogOptions {
                name: self.opt_string("catalog", false)?,
                uri: self.opt_string("catalog_uri", true)?,
                warehouse: self.opt_string("warehouse", false)?,
            },
        })
    }
}

impl OptionSource for Args<'_> {
    fn given(&self, name: &str) -> bool {
        Args::given(self, name)
    }

    fn opt_f64(&self, name: &str) -> Result<Option<f64>> {
        Args::opt_f64(self, name)
    }

    fn opt_i64_in(&self, name: &str, min: i64, max: i64) -> Result<Option<i64>> {
        Args::opt_i64_in(self, name, min, max)
    }

    fn bool(&self, name: &str, default: bool) -> Result<bool> {
        Args::bool(self, name, default)
    }

    fn opt_string(&self, name: &str, secret: bool) -> Result<Option<String>> {
        Args::opt_string(self, name, secret)
    }

    fn opt_string_list(&self, name: &str) -> Result<Option<Vec<String>>> {
        Args::opt_string_list(self, name)
    }
}

impl OptionSource for JsonOptions {
    fn given(&self, key: &str) -> bool {
        self.get(key).is_some_and(|v| !v.is_null())
    }

    fn opt_f64(&self, key: &str) -> Result<Option<f64>> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v.as_f64().map(Some).ok_or_else(|| Error::invalid(format!("{key} must be a number, got {v}"))),
        }
    }

    fn opt_i64_in(&self, key: &str, min: i64, max: i64) -> Result<Option<i64>> {
        match self.opt_f64(key)? {
            None => Ok(None),
            Some(n) if n.fract() != 0.0 || n < min as f64 => {
                Err(Error::invalid(format!("{key} must be an integer of at least {min}, got {n}")))
            }
            Some(n) if n > max as f64 => {
                Err(Error::invalid(format!("{key} must be an integer between {min} and {max}, got {n}")))
            }
            Some(n) => Ok(Some(n as i64)),
        }
    }

    fn bool(&self, key: &str, default: bool) -> Result<bool> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => v.as_bool().ok_or_else(|| Error::invalid(format!("{key} must be a boolean, got {v}"))),
        }
    }

    /// JSON errors never show the value, so `secret` changes nothing.
    fn opt_string(&self, key: &str, _secret: bool) -> Result<Option<String>> {
        match self.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(Error::invalid(format!("{key} must be a string"))),
        }
    }

    fn opt_string_list(&self, key: &str) -> Result<Option<Vec<String>>> {
        let wrong = || Error::invalid(format!("{key} must be a list of strings"));
        match self.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Array(items)) => items
                .iter()
                .map(|i| i.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .map(Some)
                .ok_or_else(wrong),
            Some(_) => Err(wrong()),
        }
    }
}
