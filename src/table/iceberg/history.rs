//! A table's history on `main`: whether the snapshot now current descends from the one a
//! rewrite read. A commit that rebases onto a moved head must: another writer may have rolled
//! `main` back (`rollback_to_snapshot`, `set_current_snapshot`, a metadata file whose current
//! snapshot is an older one) or cherry-picked onto another line, and a rewrite that read the
//! abandoned line carries its deletes — committed on the new head, it would delete again rows the
//! rollback restored. Java's rule (`MergingSnapshotProducer.validationHistory`): walk the head's
//! parents back to the starting snapshot; a walk that ends before it ("Cannot determine history
//! between starting snapshot … and the last known ancestor …") fails the commit too.

use iceberg::spec::TableMetadata;

/// How the current snapshot of `main` relates to a snapshot read earlier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Descent {
    /// The current snapshot is the one read, or one of its descendants.
    Descends,
    /// The walk back from the current snapshot ended (a snapshot without a parent, or the table
    /// has no current snapshot) without meeting it: `main` is on another line.
    Diverged,
    /// The walk back met a parent the metadata no longer holds (expired) before it: the history
    /// between them cannot be told.
    Unknown {
        /// The last snapshot the walk reached.
        last_known: i64,
    },
}

impl Descent {
    /// Why a rewrite that read `start` cannot be committed on the current head, if it cannot.
    pub fn refusal(&self, start: i64, head: Option<i64>) -> Option<String> {
        let head = head.map_or("no snapshot".to_string(), |id| format!("snapshot {id}"));
        match self {
            Descent::Descends => None,
            Descent::Diverged => Some(format!(
                "the table's current snapshot ({head}) does not descend from snapshot {start}, which this rewrite read \
                 (another writer rolled the table back or set another current snapshot)"
            )),
            Descent::Unknown { last_known } => Some(format!(
                "the history between snapshot {start}, which this rewrite read, and the table's current snapshot \
                 ({head}) cannot be determined: the parent of snapshot {last_known} is no longer in the metadata"
            )),
        }
    }
}

/// Whether `metadata`'s current snapshot descends from snapshot `start` (is it, or has it as an
/// ancestor through parent ids). A snapshot whose parent is `start` descends from it even when
/// `start` itself has since been expired. A cycle of parent ids (corrupt metadata) ends the walk
/// as [`Descent::Unknown`].
pub fn descends_from(metadata: &TableMetadata, start: i64) -> Descent {
    let Some(mut snapshot) = metadata.current_snapshot() else { return Descent::Diverged };
    // Every snapshot at most once: a longer walk has met a cycle.
    for _ in 0..=metadata.snapshots().len() {
        if snapshot.snapshot_id() == start {
            return Descent::Descends;
        }
        match snapshot.parent_snapshot_id() {
            None => return Descent::Diverged,
            Some(parent) if parent == start => return Descent::Descends,
            Some(parent) => match metadata.snapshot_by_id(parent) {
                Some(next) => snapshot = next,
                None => return Descent::Unknown { last_known: snapshot.snapshot_id() },
            },
        }
    }
    Descent::Unknown { last_known: snapshot.snapshot_id() }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Metadata with `snapshots` (id, parent) and `current` as main's snapshot.
    fn metadata(snapshots: &[(i64, Option<i64>)], current: Option<i64>) -> TableMetadata {
        let snapshots: Vec<serde_json::Value> = snapshots
            .iter()
            .enumerate()
            .map(|(i, (id, parent))| {
                let mut s = serde_json::json!({
                    "snapshot-id": id,
                    "sequence-number": i + 1,
                    "timestamp-ms": 1_700_000_000_000i64 + i as i64,
                    "manifest-list": format!("/t/metadata/snap-{id}.avro"),
                    "summary": {"operation": "append"},
                    "schema-id": 0
                });
                if let Some(p) = parent {
                    s["parent-snapshot-id"] = serde_json::json!(p);
                }
                s
            })
            .collect();
        let mut json = serde_json::json!({
            "format-version": 2,
            "table-uuid": "9c12d441-03fe-4693-9a96-a0705ddf69c1",
            "location": "/t",
            "last-sequence-number": snapshots.len(),
            "last-updated-ms": 1_700_000_100_000i64,
            "last-column-id": 1,
            "current-schema-id": 0,
            "schemas": [{"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "id", "required": true, "type": "long"}]}],
            "default-spec-id": 0,
            "partition-specs": [{"spec-id": 0, "fields": []}],
            "last-partition-id": 999,
            "default-sort-order-id": 0,
            "sort-orders": [{"order-id": 0, "fields": []}],
            "snapshots": snapshots,
            "snapshot-log": [],
            "metadata-log": []
        });
        if let Some(c) = current {
            json["current-snapshot-id"] = serde_json::json!(c);
            json["refs"] = serde_json::json!({"main": {"snapshot-id": c, "type": "branch"}});
        }
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn the_head_descends_from_itself_and_its_ancestors_only() {
        // 1 <- 2 <- 3, and 2 <- 4 (a line a rollback to 2 then an append made).
        let chain = [(1, None), (2, Some(1)), (3, Some(2)), (4, Some(2))];
        let at_3 = metadata(&chain, Some(3));
        assert_eq!(descends_from(&at_3, 3), Descent::Descends);
        assert_eq!(descends_from(&at_3, 2), Descent::Descends);
        assert_eq!(descends_from(&at_3, 1), Descent::Descends);
        assert_eq!(descends_from(&at_3, 4), Descent::Diverged, "4 is on another line");
        // Rolled back to 2: a rewrite that read 3 must not commit.
        let at_2 = metadata(&chain, Some(2));
        assert_eq!(descends_from(&at_2, 3), Descent::Diverged);
        assert!(Descent::Diverged.refusal(3, Some(2)).unwrap().contains("rolled the table back"));
        assert_eq!(descends_from(&metadata(&chain, None), 1), Descent::Diverged, "no current snapshot");
    }

    #[test]
    fn an_expired_start_still_counts_when_it_is_a_parent_and_a_gap_is_unknown() {
        // 1 and 2 expired: 3's parent is 2.
        let at_4 = metadata(&[(3, Some(2)), (4, Some(3))], Some(4));
        assert_eq!(descends_from(&at_4, 2), Descent::Descends, "the walk meets 2 as 3's parent");
        assert_eq!(descends_from(&at_4, 1), Descent::Unknown { last_known: 3 });
        assert!(Descent::Unknown { last_known: 3 }.refusal(1, Some(4)).unwrap().contains("cannot be determined"));
    }

    #[test]
    fn a_cycle_of_parents_ends_the_walk() {
        let cyclic = metadata(&[(1, Some(2)), (2, Some(1))], Some(1));
        assert!(matches!(descends_from(&cyclic, 9), Descent::Unknown { .. }));
    }
}
