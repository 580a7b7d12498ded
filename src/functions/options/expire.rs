//! `lakehouse_expire_snapshots`'s options (named parameters and the scalar's JSON keys), also
//! `lakehouse_metadata_health`'s and the gate's retention.

use crate::action::expire_snapshots::ExpiryOptions;
use crate::error::Result;
use crate::functions::args::TABLE_PARAMETERS;
use crate::table::LocateOptions;

use super::source::OptionSource;

/// The expiry's named parameters besides `dry_run` and the table ones.
pub const EXPIRY_PARAMETERS: [&str; 3] = ["snapshot_retention_days", "retain_last", "clean_expired_metadata"];

/// `lakehouse_expire_snapshots`'s parameters (and its scalar's JSON keys): [`EXPIRY_PARAMETERS`],
/// `dry_run`, the table's.
pub fn expire_parameters() -> Vec<&'static str> {
    let mut names = EXPIRY_PARAMETERS.to_vec();
    names.push("dry_run");
    names.extend(TABLE_PARAMETERS);
    names
}

/// Reads [`EXPIRY_PARAMETERS`] (absent → the table's properties, else 7 days and 1).
pub fn expiry_options(source: &impl OptionSource, dry_run: bool) -> Result<ExpiryOptions> {
    let options = ExpiryOptions {
        retention_days: source.opt_f64("snapshot_retention_days")?,
        retain_last: source.opt_i64_in("retain_last", 1, i64::from(u32::MAX))?.map(|n| n as u64),
        dry_run,
        clean_expired_metadata: source.bool("clean_expired_metadata", false)?,
    };
    options.validate()?;
    Ok(options)
}

/// `lakehouse_expire_snapshots`'s options, both forms: where the table is, the expiry's.
pub fn expire_options(source: &impl OptionSource) -> Result<(LocateOptions, ExpiryOptions)> {
    let expiry = expiry_options(source, source.bool("dry_run", false)?)?;
    Ok((source.locate_options()?, expiry))
}
