"""The table's history as the chaos harness sees it: who committed what on top of what, and the
invariants on it (harness.py calls these after every step).

- **Our commits carry their parent's rows**: a snapshot (Iceberg) or version (Delta) our action
  committed reads exactly as the one it was committed on top of; with row lineage (Iceberg v3),
  every row that had a row id there keeps it and its last-updated sequence number.
- **Our compactions descend from what they read**: a compaction's commit (not re-planned after
  a conflict) has the snapshot current when its action started among its ancestors (Iceberg);
  no RESTORE came between that version and it (Delta). A rollback between our read and our
  commit must make the commit a conflict.
- **Row ids are unique** (Iceberg v3): no two live rows share a ``_row_id``, and once the head
  snapshot assigns row ids (``first-row-id``) every live row has one.
"""

from __future__ import annotations

import collections
import json
from dataclasses import dataclass
from pathlib import Path

# A row's lineage: (_row_id, _last_updated_sequence_number), by the row's key.
Lineage = dict[int, tuple]


@dataclass(frozen=True)
class Commit:
    """One snapshot (Iceberg) or version (Delta)."""

    id: int
    parent: int | None
    order: int  # Iceberg: the sequence number (v1: the timestamp); Delta: the version
    ours: bool  # committed by this extension (Iceberg `engine-name`, Delta `clientVersion`)
    operation: str  # Iceberg: the summary's operation; Delta: commitInfo's operation
    compaction: bool = False  # ours and a compaction's (its summary counts replaced data files)
    row_ids: bool = False  # Iceberg v3: the snapshot assigns row ids (it has a `first-row-id`)


def iceberg_commits(metadata: dict) -> dict[int, Commit]:
    """The snapshots of one Iceberg metadata file."""
    version = metadata.get("format-version", 1)
    out = {}
    for snap in metadata.get("snapshots", []):
        summary = snap.get("summary", {})
        ours = summary.get("engine-name") == "lakehouse"
        order = snap.get("sequence-number", 0) if version > 1 else snap["timestamp-ms"]
        out[snap["snapshot-id"]] = Commit(snap["snapshot-id"], snap.get("parent-snapshot-id"), order, ours,
                                          summary.get("operation", ""), ours and "deleted-data-files" in summary,
                                          "first-row-id" in snap)
    return out


def delta_commit(log: Path, version: int) -> Commit | None:
    """Version `version` of the Delta log in `log` (None once the log no longer has it)."""
    try:
        lines = (log / f"{version:020d}.json").read_text().splitlines()
    except FileNotFoundError:
        return None
    actions = [json.loads(line) for line in lines if line.strip()]
    info = next((action["commitInfo"] for action in actions if "commitInfo" in action), {})
    ours = str(info.get("clientVersion", "")).startswith("lakehouse/")
    operation = info.get("operation", "")
    return Commit(version, version - 1 if version else None, version, ours, operation,
                  ours and operation == "OPTIMIZE")


def iceberg_descends(commits: dict[int, Commit], commit: Commit, base: int | None) -> bool | None:
    """Whether `base` is an ancestor of `commit`: True, False (the chain went below it or ended),
    or None (a snapshot on the way is known to no metadata file we read)."""
    if base is None:
        return True
    floor = commits[base].order if base in commits else None
    current = commit.parent
    while current is not None:
        if current == base:
            return True
        known = commits.get(current)
        if known is None:
            return None
        if floor is not None and known.order < floor:
            return False
        current = known.parent
    return False


def delta_descends(commits: dict[int, Commit], commit: Commit, base: int | None) -> bool | None:
    """Whether no RESTORE was committed after version `base` and before `commit` (None when a
    version between them is no longer in the log)."""
    start = -1 if base is None else base
    between = [commits.get(v) for v in range(start + 1, commit.id)]
    if any(c is None for c in between):
        return None
    return not any(c.operation == "RESTORE" for c in between)


def lineage_breaks(before: Lineage, after: Lineage) -> tuple[list[tuple], int]:
    """Rows that had a row id in `before` and read another id or last-updated sequence number in
    `after` — (key, before, after), at most ten — and how many changes were let pass: a lower
    sequence number where the row's id is kept. Spark's Iceberg 1.10.1 gives a row whose sequence
    number is not written in its file the file's *file* sequence number (apache/iceberg#17039,
    fixed after 1.10.1); the spec, and a rewrite that writes the number, take the data sequence
    number, which a v2 compaction before the upgrade left lower."""
    broken, tolerated = [], 0
    for key, old in before.items():
        new = after.get(key)
        if old[0] is None or new is None or new == old:
            continue
        if new[0] == old[0] and None not in (new[1], old[1]) and new[1] < old[1]:
            tolerated += 1
        else:
            broken.append((key, old, new))
    return sorted(broken)[:10], tolerated


def duplicate_row_ids(lineage: Lineage) -> list[tuple]:
    """Row ids two or more live rows share: (row id, keys), at most ten."""
    keys = collections.defaultdict(list)
    for key, (row_id, _) in lineage.items():
        if row_id is not None:
            keys[row_id].append(key)
    return sorted((row_id, sorted(ks)) for row_id, ks in keys.items() if len(ks) > 1)[:10]


def rows_without_id(lineage: Lineage) -> list[int]:
    """Keys of live rows with no row id, at most ten."""
    return sorted(key for key, (row_id, _) in lineage.items() if row_id is None)[:10]
