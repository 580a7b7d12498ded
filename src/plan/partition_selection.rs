//! The `partitions := [...]` list is checked against the table: a value that matches no
//! partition label is a typo or a partition that is gone, and compacting the rest while it
//! silently matches nothing would report a healthy table. Checked on the first plan, before
//! anything is rewritten.

use crate::error::{Error, Result};
use crate::plan::compaction::PartitionPlan;

/// How many of the table's partition labels an error lists.
const LABELS_SHOWN: usize = 10;

/// Refuses a `partitions` list with values that match no plan's label, naming them and listing
/// (up to ten of) the table's labels.
pub fn check_selected(plans: &[PartitionPlan], partitions: Option<&[String]>) -> Result<()> {
    let Some(list) = partitions else { return Ok(()) };
    let mut labels: Vec<&str> = plans.iter().map(|p| p.partition.as_str()).collect();
    labels.sort_unstable();
    labels.dedup();
    let unknown: Vec<String> =
        list.iter().filter(|v| labels.binary_search(&v.as_str()).is_err()).map(|v| format!("'{v}'")).collect();
    if unknown.is_empty() {
        return Ok(());
    }
    let known = if labels.is_empty() {
        "the table has no data files".to_string()
    } else {
        let shown: Vec<String> = labels.iter().take(LABELS_SHOWN).map(|l| format!("'{l}'")).collect();
        let more = labels.len().saturating_sub(LABELS_SHOWN);
        let rest = if more > 0 { format!(", … ({} in all)", labels.len()) } else { String::new() };
        format!("its partitions: {}{rest}", shown.join(", "))
    };
    Err(Error::invalid(format!(
        "partitions {} match{} no partition of the table (labels as lakehouse_fragmentation prints them); {known}",
        unknown.join(", "),
        if unknown.len() == 1 { "es" } else { "" }
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::compaction::{CompactionOptions, plan};
    use crate::table::{DataFile, FileContent};

    fn plans(labels: &[&str]) -> Vec<PartitionPlan> {
        let files: Vec<DataFile> = labels.iter().map(|l| DataFile::for_tests(l, 1, FileContent::Data)).collect();
        plan(&files, &CompactionOptions::default(), 1.0)
    }

    #[test]
    fn values_matching_no_partition_are_named_with_the_tables_partitions() {
        let table = plans(&["d=1", "d=2"]);
        assert!(check_selected(&table, None).is_ok());
        assert!(check_selected(&table, Some(&["d=2".into()])).is_ok());
        let error = check_selected(&table, Some(&["d=2".into(), "d=3".into(), "x".into()])).unwrap_err().to_string();
        assert!(error.contains("partitions 'd=3', 'x' match no partition"), "{error}");
        assert!(error.contains("its partitions: 'd=1', 'd=2'"), "{error}");
        let labels: Vec<String> = (0..12).map(|i| format!("d={i:02}")).collect();
        let many = plans(&labels.iter().map(String::as_str).collect::<Vec<_>>());
        let error = check_selected(&many, Some(&["nope".into()])).unwrap_err().to_string();
        assert!(error.contains("'nope' matches no partition") && error.contains("'d=09', … (12 in all)"), "{error}");
        let error = check_selected(&[], Some(&["d=1".into()])).unwrap_err().to_string();
        assert!(error.contains("the table has no data files"), "{error}");
    }
}
