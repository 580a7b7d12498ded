"""Partial progress: the gate commits a compaction partition by partition (batches of whole
partitions, at most ``max_commits``), plans a partition lost to another writer's conflicting
commit again on the new head and retries it (at most twice), and reports per partition what its
commit did. Writers we did not write (pyiceberg, deltalake) commit the conflicting changes while
our commits are held back (the test build's pause hook); the rows are then read back by
pyiceberg, DuckDB's iceberg and delta extensions, deltalake and Spark."""

from __future__ import annotations

import threading
from pathlib import Path

import pyarrow.parquet as pq
from deltalake import DeltaTable
from pyiceberg.exceptions import CommitFailedException

import conftest as c
import delta_tables as d
from test_compact_iceberg import duckdb_rows, pyiceberg_rows, sorted_rows
from test_delta import call
from test_delta import while_paused as delta_while_paused

SMALL = "small_file_threshold_mb := 1.0, target_file_size_mb := 8.0"


def gate(con, catalog, **params) -> list[dict]:
    extra = "".join(f", {k} := {str(v).lower() if isinstance(v, bool) else v}" for k, v in params.items())
    cur = con.execute(f"SELECT * FROM lakehouse_gate('{c.NAMESPACE}.by_date', catalog_uri := '{catalog.test_uri}', "
                      f"{SMALL}{extra})")
    names = [x[0] for x in cur.description]
    return [dict(zip(names, r)) for r in cur.fetchall()]


def by_partition(rows: list[dict]) -> dict[str, dict]:
    return {r["partition"]: r for r in rows}


def day_files(table, day: int) -> list:
    import datetime as dt

    wanted = (dt.date(2026, 10, day) - dt.date(1970, 1, 1)).days
    return [f for f in c.live_data_files(table) if f.partition[0] == wanted]


def deleted_row(table, target, position: int) -> tuple:
    """The row at `position` of data file `target`, as the table's scan shows rows."""
    rows = pq.read_table(c.local_path(target.file_path)).slice(position, 1)
    return sorted_rows(rows)[0]


def test_the_gate_retries_the_partition_a_delete_conflicted_and_commits_the_other(con, iceberg_con, catalog,
                                                                                   monkeypatch):
    """pyiceberg commits a position delete on a file of the second partition while the gate holds
    back its first commit: the first partition commits (rebased past the delete), the second's
    rewrite — which read the file without that delete — is refused on the new head, planned again
    with the delete applied and committed. Nothing deleted comes back."""
    table = c.build_identity_date(catalog)
    before = pyiceberg_rows(table)
    target = day_files(table, 2)[0]
    gone = deleted_row(table, target, 0)

    def concurrent_delete():
        t = catalog.load_table(f"{c.NAMESPACE}.by_date")
        c.commit_files(t, [c.position_delete_file(t, target, [0])], deletes=True)

    root = Path(c.local_path(table.location()))
    outcome = c.run_paused_before_commit(lambda: gate(con, catalog), concurrent_delete,
                                         lambda: bool(list(root.rglob("*-compacted.parquet"))), monkeypatch,
                                         pause_ms=2000)
    assert outcome["paused"] and "rows" in outcome, outcome
    rows = by_partition(outcome["rows"])
    assert rows["partition_date=2026-10-01"]["commit"] == "committed", rows
    assert rows["partition_date=2026-10-02"]["commit"] == "retried 1×, committed", rows
    assert rows["partition_date=2026-10-02"]["verdict"] == "compacted"
    assert rows["partition_date=2026-10-03"]["commit"] is None, "a healthy partition has nothing to commit"
    assert {r["status"] for r in rows.values()} == {"maintained"}
    table = catalog.load_table(f"{c.NAMESPACE}.by_date")
    expected = sorted([r for r in before if r != gone], key=repr)
    assert len(expected) == len(before) - 1
    assert pyiceberg_rows(table) == expected
    assert duckdb_rows(iceberg_con, table.metadata_location) == expected
    assert len(day_files(table, 1)) == 1 and len(day_files(table, 2)) == 1, "both partitions compacted"
    summaries = [s.summary.operation.value for s in table.snapshots()]
    assert summaries.count("replace") == 2, f"one commit per partition: {summaries}"


def test_a_partition_that_keeps_conflicting_is_given_up_and_the_run_is_incomplete(con, iceberg_con, catalog,
                                                                                    monkeypatch):
    """A writer deletes rows of one partition's file every fraction of a second for the whole
    run: each attempt at that partition (the first and two re-plans) is refused on its commit,
    so it is given up — skipped with the reason, status `incomplete`, a warning — while the other
    partition commits. The table then reads exactly as the writer left it."""
    table = c.build_identity_date(catalog)
    target = day_files(table, 2)[0]
    stop = threading.Event()
    deletes: list[int] = []

    def keep_deleting():
        position = 0
        while not stop.is_set():
            try:
                t = catalog.load_table(f"{c.NAMESPACE}.by_date")
                c.commit_files(t, [c.position_delete_file(t, target, [position % 5])], deletes=True)
                deletes.append(position)
                position += 1
            except CommitFailedException:
                continue  # our commit landed first: try again on the new head
            stop.wait(0.4)

    writer = threading.Thread(target=keep_deleting)
    root = Path(c.local_path(table.location()))
    try:
        outcome = c.run_paused_before_commit(lambda: gate(con, catalog), writer.start,
                                             lambda: bool(list(root.rglob("*-compacted.parquet"))), monkeypatch,
                                             pause_ms=1500)
    finally:
        stop.set()
        if writer.is_alive():
            writer.join(timeout=30)
    assert "rows" in outcome, outcome
    rows = by_partition(outcome["rows"])
    lost = rows["partition_date=2026-10-02"]
    assert lost["commit"].startswith("conflict: gave up after 3 attempts ("), rows
    assert lost["verdict"] == "skipped" and lost["reason"] == f"skipped: {lost['commit']}", lost
    assert lost["files_after"] == lost["files_before"], lost
    assert rows["partition_date=2026-10-01"]["commit"].endswith("committed"), rows
    assert {r["status"] for r in rows.values()} == {"incomplete"}
    assert "1 degraded partition not compacted" in rows["partition_date=2026-10-01"]["warnings"]
    table = catalog.load_table(f"{c.NAMESPACE}.by_date")
    assert len(deletes) >= 3, deletes
    assert len(day_files(table, 1)) == 1 and len(day_files(table, 2)) == 6
    expected = pyiceberg_rows(table)
    assert len(expected) == 20_000 + 12 * 5 - len({p % 5 for p in deletes}), "the file has 5 rows"
    assert duckdb_rows(iceberg_con, table.metadata_location) == expected


def test_without_partial_progress_the_gate_still_commits_once_or_not_at_all(con, catalog, monkeypatch):
    """partial_progress := false: one commit for every partition, and a conflict costs the run
    (the error says so; nothing of ours is committed)."""
    table = c.build_identity_date(catalog)
    target = day_files(table, 2)[0]

    def concurrent_delete():
        t = catalog.load_table(f"{c.NAMESPACE}.by_date")
        c.commit_files(t, [c.position_delete_file(t, target, [0])], deletes=True)

    root = Path(c.local_path(table.location()))
    outcome = c.run_paused_before_commit(lambda: gate(con, catalog, partial_progress=False), concurrent_delete,
                                         lambda: bool(list(root.rglob("*-compacted.parquet"))), monkeypatch)
    assert "commit conflict" in outcome.get("error", ""), outcome
    table = catalog.load_table(f"{c.NAMESPACE}.by_date")
    assert not [s for s in table.snapshots() if s.summary.operation.value == "replace"]


def test_delta_partial_progress_retries_the_partition_a_delete_hit(con, spark, tmp_path, monkeypatch):
    """deltalake deletes rows of a file of one partition (its file removed, a new one added) while
    `lakehouse_compact(partial_progress := true)` holds back its first commit: every other
    partition commits, the hit one is planned again on the new version and committed, and Spark,
    deltalake and DuckDB's delta extension read what deltalake says."""
    path = tmp_path / "frag"
    d.build_deltalake_fragmented(path)
    before = d.rows_deltalake(path)

    def delete():
        DeltaTable(str(path)).delete("id < 3")  # ids 0-4: the first small file of ('plain', 1, 2026-10-01)

    run = lambda: call(con, "lakehouse_compact", path, small_file_threshold_mb=d.SMALL_MB,  # noqa: E731
                       target_file_size_mb=1.0, partial_progress=True, max_commits=100)
    outcome = delta_while_paused(run, delete, path, monkeypatch)
    assert outcome["paused"] and "rows" in outcome, outcome
    compacted = [r for r in outcome["rows"] if r["verdict"] == "compacted"]
    commits = {r["partition"]: r["commit"] for r in compacted}
    assert len(compacted) >= 3, outcome["rows"]
    assert list(commits.values()).count("retried 1×, committed") == 1, commits
    assert set(commits.values()) == {"committed", "retried 1×, committed"}, commits
    assert len({r["snapshot_id"] for r in compacted}) == len(compacted), "one version per partition"
    expected = d.rows_deltalake(path)
    assert len(expected) == len(before) - 3
    dcon = d.delta_connection()
    try:
        for reader, rows in d.rows_everywhere(spark, dcon, path).items():
            assert rows == expected, reader
    finally:
        dcon.close()


def test_max_commits_1_commits_every_partition_at_once(con, catalog):
    """max_commits := 1 with partial progress: one batch, so one commit holds every partition."""
    c.build_identity_date(catalog)
    rows = by_partition(gate(con, catalog, max_commits=1))
    compacted = [r for r in rows.values() if r["verdict"] == "compacted"]
    assert len(compacted) == 2 and {r["commit"] for r in compacted} == {"committed"}, rows
    table = catalog.load_table(f"{c.NAMESPACE}.by_date")
    assert [s.summary.operation.value for s in table.snapshots()].count("replace") == 1
