"""Commits through an Iceberg REST catalog that another writer changed meanwhile.

A REST catalog applies our updates to its current metadata under our requirements (`main`
unchanged); another writer's commit to another branch in between stays. Expiry therefore decides
what to delete from the metadata the catalog committed, not from the metadata it planned on (as
Java's RemoveSnapshots cleans up from the refreshed table). And a sorted compaction's new sort
order travels with the commit (`add-sort-order`), so the `sort_order_id` its files carry names an
order the catalog's table has. Real servers on loopback (Iceberg's REST fixture, versitygw);
pyiceberg writes and reads through the catalog.
"""

from __future__ import annotations

import datetime as dt
import threading
import time

import pyarrow as pa
from pyiceberg.expressions import EqualTo

from test_object_storage import (  # noqa: F401 - fixtures
    ARROW,
    SMALL,
    env,
    fragmented,
    lh,
    pycat,
    rest,
    rows_pyiceberg,
    s3,
)


def test_expiry_keeps_what_another_writers_branch_commit_references(lh, pycat, s3, monkeypatch):
    """main: six appends over three days, then a delete of 2026-10-01 (its files are referenced
    only by the six older snapshots). While our expiry (keep 1) waits to commit, another writer
    branches off the sixth snapshot and appends there: its new snapshot references 2026-10-01's
    files. The catalog takes our expiry (main did not move) and keeps the branch; the files it
    references stay, and the branch reads completely."""
    table = fragmented(pycat, "branched", batches=6, days=3)
    sixth = table.current_snapshot().snapshot_id
    table.delete(EqualTo("day", dt.date(2026, 10, 1)))
    table = pycat.load_table("ns.branched")
    assert len(table.snapshots()) == 7

    monkeypatch.setenv("LAKEHOUSE_TEST_PAUSE_BEFORE_COMMIT_MS", "8000")
    outcome: dict = {}

    def run():
        try:
            cursor = lh.execute("SELECT * FROM lakehouse_expire_snapshots('ns.branched', "
                                "snapshot_retention_days := 0, retain_last := 1)")
            names = [d[0] for d in cursor.description]
            outcome["rows"] = [dict(zip(names, row)) for row in cursor.fetchall()]
        except Exception as e:  # noqa: BLE001 - reported below
            outcome["error"] = str(e)

    worker = threading.Thread(target=run)
    worker.start()
    time.sleep(3.0)  # planned (7 snapshots, a few manifests), now held before its commit
    assert worker.is_alive(), outcome
    writer = pycat.load_table("ns.branched")
    writer.manage_snapshots().create_branch(sixth, "b").commit()
    writer = pycat.load_table("ns.branched")
    late = [{"id": 99_999, "day": dt.date(2026, 10, 1), "name": "late", "amount": 0.0}]
    writer.append(pa.Table.from_pylist(late, schema=ARROW), branch="b")
    worker.join(timeout=120)
    assert "error" not in outcome, outcome

    table = pycat.load_table("ns.branched")
    branch_head = table.metadata.refs["b"].snapshot_id
    # Everything the branch's snapshot references is there, and it reads whole.
    io = table.io
    snapshot = table.snapshot_by_id(branch_head)
    for manifest in snapshot.manifests(io):
        for entry in manifest.fetch_manifest_entry(io):
            assert io.new_input(entry.data_file.file_path).exists(), entry.data_file.file_path
    branch_rows = table.scan(snapshot_id=branch_head).to_arrow()
    assert branch_rows.num_rows == 900 + 1, "the branch has main's sixth snapshot and its own row"
    assert {s.snapshot_id for s in table.snapshots()} == {table.current_snapshot().snapshot_id, branch_head}
    # The plan had freed them (so the order of events was as described): the warning counts them.
    kept = {r.get("warning") for r in outcome["rows"]}
    assert len(kept) == 1 and "were kept" in (kept.pop() or ""), outcome["rows"]


def test_a_sorted_compaction_adds_its_sort_order_through_the_catalog(lh, pycat):
    """A custom sort order is added to the table by the same commit, through the REST catalog:
    the order the new files name is in the catalog's table, with the fields asked for, and the
    table's default order is unchanged. (Before: the update was left out, and the files named
    an order the catalog never had.)"""
    fragmented(pycat, "sorted_rest", batches=4, days=1)
    before = rows_pyiceberg(pycat, "sorted_rest")
    rows = lh.execute(f"SELECT verdict, strategy FROM lakehouse_compact('ns.sorted_rest', {SMALL}, "
                      "sort_order := 'amount DESC NULLS LAST, name')").fetchall()
    assert rows == [("compacted", "sort(amount DESC NULLS LAST, name ASC NULLS FIRST)")], rows
    table = pycat.load_table("ns.sorted_rest")
    assert rows_pyiceberg(pycat, "sorted_rest") == before
    (entry,) = [f for f in table.inspect.files().to_pylist() if f["content"] == 0]
    order_id = entry["sort_order_id"]
    orders = table.sort_orders()  # id -> SortOrder
    assert order_id in orders, (order_id, orders)
    fields = [(table.schema().find_column_name(f.source_id), f.direction.value, f.null_order.value)
              for f in orders[order_id].fields]
    assert fields == [("amount", "desc", "nulls-last"), ("name", "asc", "nulls-first")], fields
    assert table.sort_order().order_id == 0, "the default order is unchanged"
