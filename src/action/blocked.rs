//! What maintenance a table blocks, and why: the refusals the actions make, as text the read-only
//! functions (`lakehouse_fragmentation`, its summary, `lakehouse_metadata_health`) report in
//! `compaction_blocked_by` and `cleanup_blocked_by` instead of failing. Each reason comes from
//! the one check its action refuses by, so a column and an action's error never disagree:
//! Delta compaction's [`crate::action::compact::delta::protocol_refusal`] (its feature list),
//! VACUUM's [`crate::action::vacuum::protocol_refusal`], and an Iceberg table's
//! [`crate::table::iceberg::IcebergTable::rewrite_refusal`] (stand-in types, `timestamptz_ns`,
//! lost defaults) and `metadata_write_refusal` (lost defaults: no commit, so no expiry).

use crate::action::compact::delta::protocol_refusal as compaction_refusal;
use crate::action::vacuum::protocol_refusal as vacuum_refusal;
use crate::error::Result;
use crate::profile::{PartitionProfile, Thresholds, table_profile};
use crate::table::{LocateOptions, Table};

/// What blocks each kind of maintenance of a table (`None`: nothing does).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Blocked {
    /// Why `lakehouse_compact` (and the gate's rewrites) refuse the table.
    pub compaction: Option<String>,
    /// Why retiring history is refused: Delta's `lakehouse_vacuum`; Iceberg's snapshot expiry
    /// (and every other commit).
    pub cleanup: Option<String>,
}

/// What blocks the maintenance of `table`, from the checks the actions refuse by.
pub fn blocked(table: &Table) -> Blocked {
    match table {
        Table::Iceberg { table, .. } => {
            Blocked { compaction: table.rewrite_refusal(), cleanup: table.metadata_write_refusal() }
        }
        Table::Delta(table) => Blocked { compaction: compaction_refusal(table), cleanup: vacuum_refusal(table) },
    }
}

/// Opens and profiles `table_name` (Iceberg or Delta): its partitions, and what maintenance it
/// blocks and why (reported, never an error: a table the profile can read is profiled).
pub fn profile_with_blocked(
    table_name: &str,
    locate: &LocateOptions,
    thresholds: &Thresholds,
) -> Result<(Vec<PartitionProfile>, Blocked)> {
    let table = Table::open(table_name, locate)?;
    Ok((table_profile(&table, thresholds)?, blocked(&table)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::delta::DeltaLakeTable;
    use serde_json::json;

    /// A Delta table of one commit (protocol 3/7 with `readers`/`writers`, a schema, one add of a
    /// file never read) in a fresh directory.
    fn delta_table(readers: &[&str], writers: &[&str]) -> (std::path::PathBuf, Table) {
        let root = std::env::temp_dir().join(format!("lakehouse-blocked-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(root.join("_delta_log")).unwrap();
        let schema = json!({"type": "struct", "fields": [
            {"name": "id", "type": "long", "nullable": true, "metadata": {}}]});
        let actions = [
            json!({"protocol": {"minReaderVersion": 3, "minWriterVersion": 7,
                                "readerFeatures": readers, "writerFeatures": writers}}),
            json!({"metaData": {"id": "6f1c1b4e-3c44-4b7a-9d53-0cba9f3f0a11", "format": {"provider": "parquet",
                   "options": {}}, "schemaString": schema.to_string(), "partitionColumns": [],
                   "configuration": {}, "createdTime": 1_700_000_000_000i64}}),
            json!({"add": {"path": "part-0.parquet", "partitionValues": {}, "size": 100,
                   "modificationTime": 1_700_000_000_000i64, "dataChange": true,
                   "stats": "{\"numRecords\":1}"}}),
        ];
        let log: Vec<String> = actions.iter().map(|a| a.to_string()).collect();
        std::fs::write(root.join("_delta_log").join(format!("{:020}.json", 0)), log.join("\n") + "\n").unwrap();
        let table = Table::Delta(DeltaLakeTable::load(&root).unwrap());
        (root, table)
    }

    #[test]
    fn a_delta_feature_blocks_what_its_action_refuses_and_says_why() {
        // Variant is compacted (stitched only) and vacuumed; Iceberg compatibility V3 is vacuumed
        // (its metadata directory left alone), not compacted.
        let (root, table) = delta_table(
            &["variantType-preview", "variantShredding-preview"],
            &["variantType-preview", "variantShredding-preview", "icebergCompatV3"],
        );
        let b = blocked(&table);
        assert_eq!(
            b.compaction.as_deref(),
            Some(
                "uses feature 'icebergCompatV3': its files must carry the row-lineage field ids Iceberg v3 reads, which \
                 this rewrite does not write"
            )
        );
        assert_eq!(b.cleanup, None);
        // The actions refuse by the same words, naming the table.
        let Table::Delta(delta) = &table else { unreachable!() };
        let refused = crate::action::compact::delta::check_protocol(delta).unwrap_err().to_string();
        assert!(
            refused.contains(b.compaction.as_deref().unwrap()) && refused.contains("compaction does not rewrite it")
        );
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn an_unknown_writer_feature_blocks_both_naming_it() {
        for feature in ["liquid", "geospatial"] {
            let (root, table) = delta_table(&[], &["appendOnly", "domainMetadata", feature]);
            let b = blocked(&table);
            assert_eq!(
                b.compaction,
                Some(format!("uses writer feature '{feature}' (not known to this version)")),
                "{feature}"
            );
            assert_eq!(
                b.cleanup,
                Some(format!("uses writer feature '{feature}', whose files this vacuum does not know")),
                "{feature}"
            );
            std::fs::remove_dir_all(root).unwrap();
        }
    }

    #[test]
    fn a_delta_table_of_known_features_blocks_nothing() {
        for writers in [&["collations", "domainMetadata"], &["collations-preview", "domainMetadata"]] {
            let (root, table) = delta_table(&[], writers);
            assert_eq!(blocked(&table), Blocked::default(), "{writers:?}");
            std::fs::remove_dir_all(root).unwrap();
        }
        let (root, table) = delta_table(&["deletionVectors"], &["deletionVectors", "appendOnly"]);
        assert_eq!(blocked(&table), Blocked::default());
        std::fs::remove_dir_all(root).unwrap();
    }
}
