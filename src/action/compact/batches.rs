//! The pieces of partial progress the compaction flow ([`super::run`]) uses below the report:
//! how rewrite units are batched into commits ([`batches`]) and what a partition's commit did
//! ([`PartitionOutcome`]). The policy around them is [`super::progress`]'s.

use std::ops::Range;

/// What one compacting partition's commit did, after every attempt.
#[derive(Debug, Clone, PartialEq)]
pub struct PartitionOutcome {
    /// Attempts made: 1, plus one per re-plan.
    pub attempts: u32,
    /// The commit that holds its rewrite (none: not committed).
    pub snapshot_id: Option<i64>,
    /// Why its last attempt was lost to a conflict (none: it was not).
    pub conflict: Option<String>,
    /// After a re-plan: why the partition no longer needed compacting (another writer compacted
    /// or removed its files), when it did not.
    pub settled: Option<String>,
}

impl PartitionOutcome {
    /// Whether the rewrite was lost to a conflict (so far).
    pub fn gave_up(&self) -> bool {
        self.conflict.is_some()
    }

    /// `committed`, `retried 2×, committed`, `retried 1×, nothing left to compact (…)`,
    /// `conflict: gave up after 3 attempts (…)`.
    pub fn describe(&self) -> String {
        let retried = self.attempts.saturating_sub(1);
        match (&self.conflict, &self.settled) {
            (Some(why), _) => format!(
                "conflict: gave up after {} attempt{} ({why})",
                self.attempts,
                if self.attempts == 1 { "" } else { "s" }
            ),
            (None, Some(why)) => format!("retried {retried}×, nothing left to compact ({why})"),
            (None, None) if retried == 0 => "committed".into(),
            (None, None) => format!("retried {retried}×, committed"),
        }
    }
}

/// The commit batches of the rewrite units, in plan order (`unit_plans[u]`: the plan of unit
/// `u`, non-decreasing): ranges of whole partitions, at most `max_commits` of them, as even in
/// units as whole partitions allow.
pub fn batches(unit_plans: &[usize], max_commits: u64) -> Vec<Range<usize>> {
    // Each partition's range of units.
    let mut partitions: Vec<Range<usize>> = Vec::new();
    for (u, plan) in unit_plans.iter().enumerate() {
        match partitions.last_mut() {
            Some(last) if unit_plans[last.start] == *plan => last.end = u + 1,
            _ => partitions.push(u..u + 1),
        }
    }
    let max = (max_commits.max(1) as usize).min(partitions.len().max(1));
    let mut capacity = unit_plans.len().div_ceil(max);
    loop {
        let mut out: Vec<Range<usize>> = Vec::new();
        for p in &partitions {
            match out.last_mut() {
                Some(last) if p.end - last.start <= capacity => last.end = p.end,
                _ => out.push(p.clone()),
            }
        }
        if out.len() <= max {
            return out;
        }
        capacity += 1;
    }
}

/// Two warnings as one (a warning already said once is not repeated: a re-planned run says
/// again where its files go).
pub fn joined(a: Option<String>, b: Option<String>) -> Option<String> {
    match (a, b) {
        (Some(a), Some(b)) if a == b || a.split("; ").any(|part| part == b) => Some(a),
        (Some(a), Some(b)) => Some(format!("{a}; {b}")),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warnings_join_once() {
        let some = |s: &str| Some(s.to_string());
        assert_eq!(joined(some("a"), some("b")), some("a; b"));
        assert_eq!(joined(some("a; b"), some("b")), some("a; b"));
        assert_eq!(joined(some("a"), some("a")), some("a"));
        assert_eq!(joined(None, some("b")), some("b"));
        assert_eq!(joined(some("a"), None), some("a"));
    }

    #[test]
    fn batches_hold_whole_partitions_at_most_max_commits_of_them() {
        let ranges = |plans: &[usize], max| batches(plans, max);
        // Ten partitions of one unit, at most 10 commits: one each; at most 3: 4, 4, 2.
        let ten: Vec<usize> = (0..10).collect();
        assert_eq!(ranges(&ten, 10).len(), 10);
        assert_eq!(ranges(&ten, 3), vec![0..4, 4..8, 8..10]);
        // Partitions of 2, 3, 2, 3 units in at most 3 commits: no partition is split.
        let uneven = [0, 0, 1, 1, 1, 2, 2, 3, 3, 3];
        let got = ranges(&uneven, 3);
        assert!(got.len() <= 3, "{got:?}");
        for r in &got {
            assert!(r.start == 0 || uneven[r.start] != uneven[r.start - 1], "{got:?} splits a partition");
        }
        assert_eq!(got.iter().map(|r| r.len()).sum::<usize>(), uneven.len());
        // One partition (an unpartitioned table): one commit, whatever max_commits.
        assert_eq!(ranges(&[0, 0, 0, 0], 10), vec![0..4]);
        // One commit asked: everything at once.
        assert_eq!(ranges(&uneven, 1), vec![0..10]);
        assert!(ranges(&[], 10).is_empty());
    }

    #[test]
    fn outcomes_read_as_the_issue_spells_them() {
        let o = |attempts, conflict: Option<&str>, settled: Option<&str>| PartitionOutcome {
            attempts,
            snapshot_id: None,
            conflict: conflict.map(String::from),
            settled: settled.map(String::from),
        };
        assert_eq!(o(1, None, None).describe(), "committed");
        assert_eq!(o(3, None, None).describe(), "retried 2×, committed");
        assert_eq!(o(3, Some("x was removed"), None).describe(), "conflict: gave up after 3 attempts (x was removed)");
        assert_eq!(o(1, Some("y"), None).describe(), "conflict: gave up after 1 attempt (y)");
        assert_eq!(
            o(2, None, Some("healthy: ratio 0.10 < 0.35")).describe(),
            "retried 1×, nothing left to compact (healthy: ratio 0.10 < 0.35)"
        );
    }
}
