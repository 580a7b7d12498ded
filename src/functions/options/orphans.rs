//! The orphan window, `older_than_days`: `lakehouse_remove_orphan_files`'s and
//! `lakehouse_metadata_health`'s.

use crate::action::remove_orphan_files::DEFAULT_OLDER_THAN_DAYS;
use crate::error::{Error, Result};

use super::source::OptionSource;

/// Reads `older_than_days` (default 3), a number >= 0.
pub fn older_than_days(source: &impl OptionSource) -> Result<f64> {
    let days = source.f64("older_than_days", DEFAULT_OLDER_THAN_DAYS)?;
    if !days.is_finite() || days < 0.0 {
        return Err(Error::invalid(format!("older_than_days must be a number >= 0, got {days}")));
    }
    Ok(days)
}
