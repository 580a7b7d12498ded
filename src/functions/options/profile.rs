//! The profile functions' options: `lakehouse_fragmentation`'s and
//! `lakehouse_fragmentation_summary`'s.

use crate::error::Result;
use crate::functions::args::{Args, TABLE_PARAMETERS, THRESHOLD_PARAMETERS};
use crate::profile::{DEFAULT_MIN_INPUT_FILES, Thresholds};
use crate::table::LocateOptions;

use super::source::OptionSource;

/// The arguments shared by the profile functions.
pub struct ProfileInput {
    /// What the user named the table.
    pub table: String,
    /// How to resolve it.
    pub locate: LocateOptions,
    /// The verdict's thresholds.
    pub thresholds: Thresholds,
}

/// The profile functions' named parameters: the thresholds, `min_input_files`, the table's.
pub fn profile_parameters() -> Vec<&'static str> {
    let mut names = THRESHOLD_PARAMETERS.to_vec();
    names.push("min_input_files");
    names.extend(TABLE_PARAMETERS);
    names
}

/// Parses `table` and the threshold and table options.
pub fn parse_profile_input(args: &Args) -> Result<ProfileInput> {
    let table = args.required_string(0, "table")?;
    let min_input_files = args.i64_in("min_input_files", DEFAULT_MIN_INPUT_FILES as i64, 2, i64::from(u32::MAX))?;
    let thresholds = args.thresholds()?.with_min_input_files(min_input_files as u64)?;
    Ok(ProfileInput { table, locate: args.locate_options()?, thresholds })
}
