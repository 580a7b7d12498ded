//! Options that apply to one table format only ([`FORMAT_ONLY`]), and what a call does when it
//! is given one for a table of the other format: `lakehouse_compact` refuses it, naming the
//! option and the table's format ([`FormatOnly::refuse`]); where one options template serves many
//! tables of both formats — the gate (and the webhook server, which runs it with one template),
//! the multi-table scalar forms — the option is ignored on the other format and the result's
//! warning names it ([`FormatOnly::warning`]). The format is known only once the table is open,
//! so the options given are recorded at bind and checked then.

use crate::error::{Error, Result};
use crate::table::TableFormat;

/// Every option that applies to one format only: its name, that format, and why it does not
/// apply to the other.
pub const FORMAT_ONLY: [(&str, TableFormat, &str); 5] = [
    (
        "latest_metadata",
        TableFormat::Iceberg,
        "it picks an Iceberg metadata file; a Delta table is read at its latest version",
    ),
    (
        "skip_recent_partitions",
        TableFormat::Iceberg,
        "it holds back partitions of Iceberg time transforms; Delta partitions are plain values",
    ),
    ("spark_catalog", TableFormat::Iceberg, "Spark rewrites a Delta table by its path, through no catalog"),
    ("retain_last", TableFormat::Iceberg, "Delta's VACUUM keeps files by age alone"),
    ("clean_expired_metadata", TableFormat::Iceberg, "a Delta table has no partition specs or schemas to drop"),
];

/// The options of [`FORMAT_ONLY`] a call was given (present and not NULL).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FormatOnly {
    given: Vec<&'static str>,
}

impl FormatOnly {
    /// The options of [`FORMAT_ONLY`] for which `is_given` says yes.
    pub fn given(is_given: impl Fn(&str) -> bool) -> Self {
        Self { given: FORMAT_ONLY.iter().map(|(name, _, _)| *name).filter(|name| is_given(name)).collect() }
    }

    /// The options given that do not apply to `format`, each with the format it applies to and why.
    fn not_applying(&self, format: TableFormat) -> Vec<String> {
        FORMAT_ONLY
            .iter()
            .filter(|(name, only, _)| *only != format && self.given.contains(name))
            .map(|(name, only, why)| format!("{name} applies to {} tables only ({why})", only.short()))
            .collect()
    }

    /// An error naming every option given that does not apply to a `format` table.
    pub fn refuse(&self, format: TableFormat) -> Result<()> {
        let wrong = self.not_applying(format);
        if wrong.is_empty() {
            return Ok(());
        }
        Err(Error::invalid(format!(
            "{}; this is a {} table: leave {} out",
            wrong.join("; "),
            format.name(),
            pronoun(&wrong)
        )))
    }

    /// A warning naming every option given that does not apply to a `format` table (ignored).
    pub fn warning(&self, format: TableFormat) -> Option<String> {
        let wrong = self.not_applying(format);
        (!wrong.is_empty()).then(|| format!("ignored on this {} table: {}", format.name(), wrong.join("; ")))
    }
}

fn pronoun(items: &[String]) -> &'static str {
    if items.len() == 1 { "it" } else { "them" }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iceberg_only_options_are_named_on_delta_tables_only() {
        let none = FormatOnly::given(|_| false);
        assert!(none.refuse(TableFormat::Delta).is_ok());
        assert_eq!(none.warning(TableFormat::Delta), None);
        let given = FormatOnly::given(|name| ["retain_last", "skip_recent_partitions"].contains(&name));
        assert!(given.refuse(TableFormat::Iceberg).is_ok());
        assert_eq!(given.warning(TableFormat::Iceberg), None);
        let error = given.refuse(TableFormat::Delta).unwrap_err().to_string();
        for part in [
            "skip_recent_partitions applies to Iceberg tables only",
            "retain_last applies to Iceberg",
            "Delta Lake table",
            "them out",
        ] {
            assert!(error.contains(part), "{error}");
        }
        let warning = given.warning(TableFormat::Delta).unwrap();
        assert!(
            warning.starts_with("ignored on this Delta Lake table: ") && warning.contains("retain_last"),
            "{warning}"
        );
    }

    #[test]
    fn every_format_only_option_is_named_once() {
        let mut names: Vec<&str> = FORMAT_ONLY.iter().map(|(n, _, _)| *n).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), FORMAT_ONLY.len());
    }
}
