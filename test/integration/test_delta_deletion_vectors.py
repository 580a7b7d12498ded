"""Delta deletion vectors applied by compaction, against Spark 4.0.1 + Delta 4.0.0 (which wrote
the vectors), DuckDB's delta extension and deltalake (which read them).

A file's vector is read by us, checked, and its rows left out of the rewrite; the commit's
``remove`` carries the vector's descriptor and the new ``add`` has none. A file whose vector
deletes at least ``delete_ratio_threshold`` (default 0.05, Delta's ``maxDeletedRowsRatio``) of its
rows is rewritten even alone — the case Spark's OPTIMIZE misses (delta#5781). After our rewrite,
Spark keeps writing (new vectors included) with the result it has on an untouched twin; a Spark
DELETE that changes the vector of a file we are rewriting aborts our commit, leaving nothing
behind; a DELETE on another file does not.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import conftest as c
import delta_tables as d
from test_delta import assert_optimize_commit, call, compact, dcon, error_of  # noqa: F401 (dcon: a fixture)

NOT_SMALL_MB = 0.001  # below every file of the purge table: nothing is small, only deleted rows count


@pytest.fixture(scope="module")
def purge_table(spark, tmp_path_factory) -> Path:
    """Pristine (copied by each test): two 3000-row files, the first with 600 rows deleted by its
    vector, the second 30 (d.build_spark_purge)."""
    path = tmp_path_factory.mktemp("delta-dv") / "purge"
    d.build_spark_purge(spark, path)
    return path


def live_descriptors(path: Path, version: int) -> dict[str, dict | None]:
    """Each live file's deletion-vector descriptor as of ``version``, replaying the commits (the
    purge table has no checkpoint)."""
    live: dict[str, dict | None] = {}
    for v in range(version + 1):
        actions = d.commit_actions(path, v)
        # A DELETE removes and re-adds the same path (with its new vector): removes first.
        for action in actions:
            if "remove" in action:
                live.pop(action["remove"]["path"], None)
        for action in actions:
            if "add" in action:
                live[action["add"]["path"]] = action["add"].get("deletionVector")
    return live


def test_a_file_degraded_by_deleted_rows_is_purged_alone(con, dcon, spark, purge_table, tmp_path):
    """The first file (20 % deleted) is rewritten alone, its 600 deleted rows gone from storage;
    the second (1 %) keeps its vector; every reader sees the same rows, now and as of before."""
    path = d.twin(purge_table, tmp_path / "purge")
    before = d.rows_everywhere(spark, dcon, path, polars=False)
    assert all(rows == before["spark"] for rows in before.values()) and len(before["spark"]) == 6000 - 630
    version = d.current_version(path)
    descriptors = live_descriptors(path, version)
    assert sorted(dv["cardinality"] for dv in descriptors.values()) == [30, 600]

    held = compact(con, path, small_file_threshold_mb=NOT_SMALL_MB, delete_ratio_threshold=0.5)
    assert held["(unpartitioned)"]["verdict"] == "healthy" and d.current_version(path) == version

    plan = compact(con, path, small_file_threshold_mb=NOT_SMALL_MB, dry_run=True)["(unpartitioned)"]
    assert plan["verdict"] == "would compact" and plan["rows_purged"] == 600, plan
    assert plan["reason"] == "purge: 1 file with >= 5% of rows deleted, applying 1 deletion vectors", plan

    done = compact(con, path, small_file_threshold_mb=NOT_SMALL_MB)
    row = done["(unpartitioned)"]
    assert (row["verdict"], row["input_files"], row["output_files"]) == ("compacted", 1, 1), row
    assert (row["rows_purged"], row["delete_files"], row["delete_files_removed"]) == (600, 2, 1), row
    assert d.current_version(path) == version + 1
    actions = d.commit_actions(path, version + 1)
    (remove,) = [a["remove"] for a in actions if "remove" in a]
    (add,) = [a["add"] for a in actions if "add" in a]
    assert remove["deletionVector"] == descriptors[remove["path"]], "the remove names the vector it retires"
    assert remove["deletionVector"]["cardinality"] == 600
    assert add.get("deletionVector") is None and json.loads(add["stats"])["numRecords"] == 3000 - 600
    after = live_descriptors(path, version + 1)
    assert [dv["cardinality"] for dv in after.values() if dv] == [30], "the 1 % file keeps its vector"
    assert_optimize_commit(spark, path, version + 1, done, [])
    for reader, rows in d.rows_everywhere(spark, dcon, path, polars=False).items():
        assert rows == before["spark"], reader
    for reader, rows in d.rows_everywhere(spark, dcon, path, version=version, polars=False).items():
        assert rows == before["spark"], f"{reader}: time travel"

    # Any deleted row (REORG TABLE … APPLY (PURGE)): the other file too.
    again = compact(con, path, small_file_threshold_mb=NOT_SMALL_MB, delete_ratio_threshold=0)["(unpartitioned)"]
    assert (again["verdict"], again["rows_purged"]) == ("compacted", 30), again
    assert not any(live_descriptors(path, version + 2).values())
    for reader, rows in d.rows_everywhere(spark, dcon, path, polars=False).items():
        assert rows == before["spark"], reader


def test_bad_delete_ratio_thresholds_are_refused(con, purge_table, tmp_path):
    path = d.twin(purge_table, tmp_path / "purge")
    for bad in ("-0.1", "1.5", "'half'"):
        message = error_of(con, f"SELECT * FROM lakehouse_compact('{path}', delete_ratio_threshold := {bad})")
        assert "lakehouse_compact" in message and "delete_ratio_threshold" in message, message


def test_spark_keeps_writing_on_a_purged_table(con, dcon, spark, purge_table, tmp_path):
    """DELETE (new vectors, one on our new file), UPDATE and MERGE by Spark after our purge give
    the rows they give on the untouched twin."""
    ours = d.twin(purge_table, tmp_path / "ours")
    untouched = d.twin(purge_table, tmp_path / "untouched")
    done = compact(con, ours, small_file_threshold_mb=NOT_SMALL_MB, delete_ratio_threshold=0)
    assert done["(unpartitioned)"]["rows_purged"] == 630
    for path in (ours, untouched):
        t = f"delta.`{path}`"
        d.spark_sql(spark, f"DELETE FROM {t} WHERE id % 7 = 0")
        d.spark_sql(spark, f"UPDATE {t} SET v = concat('u', v) WHERE id % 11 = 0")
        d.spark_sql(spark, f"MERGE INTO {t} AS t USING (SELECT id, 'm' AS v, 1.0 AS x FROM range(2990, 3010)) AS s "
                           "ON t.id = s.id WHEN MATCHED THEN DELETE WHEN NOT MATCHED THEN INSERT *")
    assert any(live_descriptors(ours, d.current_version(ours)).values()), "Spark wrote vectors on top of ours"
    expected = d.rows_spark(spark, untouched)
    for reader, rows in d.rows_everywhere(spark, dcon, ours, polars=False).items():
        assert rows == expected, reader


def purge_while_spark_deletes(con, spark, path: Path, predicate: str, monkeypatch) -> tuple[dict, int]:
    """Our purge (default threshold) held before its commit while Spark runs ``DELETE … WHERE
    predicate``; the outcome and Spark's version."""
    existing = d.data_listing(path)
    spark_version: list[int] = []

    def delete():
        d.spark_sql(spark, f"DELETE FROM delta.`{path}` WHERE {predicate}")
        spark_version.append(d.current_version(path))

    run = lambda: compact(con, path, small_file_threshold_mb=NOT_SMALL_MB)  # noqa: E731
    outcome = c.run_paused_before_commit(run, delete, lambda: bool(d.data_listing(path) - existing), monkeypatch,
                                         pause_ms=15000)
    assert outcome["paused"], outcome
    return outcome, spark_version[0]


def test_a_spark_delete_on_a_file_being_purged_aborts_our_commit(con, dcon, spark, purge_table, tmp_path, monkeypatch):
    """Spark replaces the vector of the file we are rewriting while we wait to commit: our commit
    fails as a conflict, nothing of ours stays (no commit, no file), and no row Spark deleted comes
    back."""
    path = d.twin(purge_table, tmp_path / "purge")
    data_before = d.data_listing(path)
    outcome, spark_version = purge_while_spark_deletes(con, spark, path, "id < 10000 AND id % 10 = 2", monkeypatch)
    assert "commit conflict" in outcome.get("error", "") and "were deleted" in outcome["error"], outcome
    assert d.current_version(path) == spark_version, "no commit after Spark's"
    spark_files = {os.path.relpath(d._abs(path, a["add"]["path"]), path)
                   for a in d.commit_actions(path, spark_version) if "add" in a}
    assert d.data_listing(path) == data_before | {f for f in spark_files if f.endswith(".parquet")}
    expected = d.rows_spark(spark, path)
    assert len(expected) == 6000 - 630 - 300
    for reader, rows in d.rows_everywhere(spark, dcon, path, polars=False).items():
        assert rows == expected, reader


def test_a_spark_delete_on_another_file_meanwhile_is_kept(con, dcon, spark, purge_table, tmp_path, monkeypatch):
    """Spark deletes rows of the file we are not rewriting while we wait: our commit lands after
    Spark's, and both Spark's deletes and our purge hold."""
    path = d.twin(purge_table, tmp_path / "purge")
    outcome, spark_version = purge_while_spark_deletes(con, spark, path, "id >= 10000 AND id % 100 = 2", monkeypatch)
    assert "rows" in outcome, outcome
    assert outcome["rows"]["(unpartitioned)"]["verdict"] == "compacted"
    assert d.current_version(path) == spark_version + 1
    expected = d.rows_spark(spark, path, version=spark_version)
    assert len(expected) == 6000 - 630 - 30
    for reader, rows in d.rows_everywhere(spark, dcon, path, polars=False).items():
        assert rows == expected, reader


def test_the_gate_purges_and_verifies_the_rows(con, dcon, spark, purge_table, tmp_path, monkeypatch):
    """The gate on the purge table: the 20 % file is purged, its scan before (vector applied) and
    after read the same rows, and the scorecard reports the rows purged."""
    monkeypatch.delenv("SLACK_WEBHOOK_URL", raising=False)
    path = d.twin(purge_table, tmp_path / "purge")
    before = d.rows_spark(spark, path)
    rows = call(con, "lakehouse_gate", path, small_file_threshold_mb=NOT_SMALL_MB)
    (row,) = rows
    assert row["status"] == "maintained" and row["verdict"] == "compacted", row
    assert row["rows_purged"] == 600 and row["warnings"] is None, row
    for reader, got in d.rows_everywhere(spark, dcon, path, polars=False).items():
        assert got == before, reader
