"""Delta row tracking kept by compaction, against Spark 4.0.1 + Delta 4.0.0: every row keeps its
``_metadata.row_id`` and ``_metadata.row_commit_version`` (written as materialized columns), the
new files get fresh ``baseRowId``s above the high-water mark, which the same commit raises, and
``defaultRowCommitVersion`` = the commit's version; the commit says ``delta.rowTracking.preserved``;
Spark keeps handing out ids that collide with none.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import delta_tables as d
from test_delta import compact, dcon  # noqa: F401 (dcon: a fixture)

SMALL_MB = 1.0


@pytest.fixture(scope="module")
def tracked(spark, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("delta-rt") / "rt"
    d.build_spark_row_tracking(spark, path)
    return path


def rows_with_ids(spark, path: Path) -> list[tuple]:
    """(id, p, v, row id, row commit version) of every row, per Spark, sorted."""
    frame = spark.sql(f"SELECT id, p, v, _metadata.row_id AS rid, _metadata.row_commit_version AS rcv FROM delta.`{path}`")
    return sorted(tuple(r) for r in frame.collect())


def high_water_mark(path: Path, version: int) -> int | None:
    mark = None
    for v in range(version + 1):
        for action in d.commit_actions(path, v):
            domain = action.get("domainMetadata")
            if domain and domain["domain"] == "delta.rowTracking" and not domain.get("removed"):
                mark = json.loads(domain["configuration"])["rowIdHighWaterMark"]
    return mark


def test_compaction_keeps_every_row_id_and_commit_version(con, dcon, spark, tracked, tmp_path):  # noqa: F811
    path = d.twin(tracked, tmp_path / "rt")
    before = rows_with_ids(spark, path)
    assert len({r[3] for r in before}) == len(before), "row ids are unique before"
    assert len({r[4] for r in before}) > 1, "rows of several commit versions"
    version = d.current_version(path)
    mark = high_water_mark(path, version)
    assert mark is not None
    rows = compact(con, path, small_file_threshold_mb=SMALL_MB, target_file_size_mb=SMALL_MB)
    assert {r["verdict"] for r in rows.values()} == {"compacted"}, rows
    assert d.current_version(path) == version + 1
    assert rows_with_ids(spark, path) == before, "every row keeps its id and commit version"
    actions = d.commit_actions(path, version + 1)
    adds = [a["add"] for a in actions if "add" in a]
    removes = [a["remove"] for a in actions if "remove" in a]
    assert all(r.get("baseRowId") is not None for r in removes), "removes carry the retired files' baseRowId"
    bases = sorted((a["baseRowId"], json.loads(a["stats"])["numRecords"]) for a in adds)
    assert bases[0][0] == mark + 1 and all(a["defaultRowCommitVersion"] == version + 1 for a in adds)
    for (base, count), (following, _) in zip(bases, bases[1:]):
        assert following == base + count, "fresh ranges, one after the other"
    assert high_water_mark(path, version + 1) == bases[-1][0] + bases[-1][1] - 1
    (info,) = [a["commitInfo"] for a in actions if "commitInfo" in a]
    assert info["tags"]["delta.rowTracking.preserved"] == "true"
    assert d.rows_duckdb(dcon, path) == d.rows_spark(spark, path)
    assert rows_with_ids(spark, path) == before
    # Spark writes on top: new rows get ids no row has.
    d.spark_sql(spark, f"INSERT INTO delta.`{path}` SELECT id, 'a', 'new' FROM range(9000, 9010)")
    d.spark_sql(spark, f"UPDATE delta.`{path}` SET v = 'again' WHERE id % 3 = 0")
    after = rows_with_ids(spark, path)
    assert len({r[3] for r in after}) == len(after), "row ids stay unique"
    kept = {r[0]: r[3] for r in before}
    assert all(kept[r[0]] == r[3] for r in after if r[0] in kept), "updates keep row ids"


def test_the_gate_keeps_row_ids(con, spark, tracked, tmp_path, monkeypatch):
    """The gate's scans before and after cover the row ids too (they must agree)."""
    monkeypatch.delenv("SLACK_WEBHOOK_URL", raising=False)
    path = d.twin(tracked, tmp_path / "rt")
    before = rows_with_ids(spark, path)
    rows = con.execute(f"SELECT status, verdict, warnings FROM lakehouse_gate('{path}', small_file_threshold_mb := {SMALL_MB}, "
                       f"target_file_size_mb := {SMALL_MB})").fetchall()
    assert {r[0] for r in rows} == {"maintained"} and {r[1] for r in rows} == {"compacted"}, rows
    assert rows_with_ids(spark, path) == before


def test_an_append_meanwhile_gets_ids_ours_do_not_reuse(con, spark, tracked, tmp_path, monkeypatch):
    """Spark appends (handing out row ids, raising the high-water mark) while our rewrite waits
    to commit: ours, pinned to the version it read, is refused that version, reads the table
    again and commits on top with ranges above Spark's; every row id stays unique and every old
    row keeps its id."""
    import conftest as c

    path = d.twin(tracked, tmp_path / "rt")
    before = rows_with_ids(spark, path)
    existing = d.data_listing(path)
    spark_version: list[int] = []

    def append():
        d.spark_sql(spark, f"INSERT INTO delta.`{path}` SELECT id, 'a', 'meanwhile' FROM range(7000, 7050)")
        spark_version.append(d.current_version(path))

    run = lambda: compact(con, path, small_file_threshold_mb=SMALL_MB, target_file_size_mb=SMALL_MB)  # noqa: E731
    outcome = c.run_paused_before_commit(run, append, lambda: bool(d.data_listing(path) - existing), monkeypatch,
                                         pause_ms=15000)
    assert outcome["paused"] and "rows" in outcome, outcome
    assert d.current_version(path) == spark_version[0] + 1
    assert high_water_mark(path, d.current_version(path)) > high_water_mark(path, spark_version[0])
    after = rows_with_ids(spark, path)
    assert len(after) == len(before) + 50 and len({r[3] for r in after}) == len(after), "row ids unique"
    assert [r for r in after if r[2] != "meanwhile"] == before, "old rows keep ids and versions"
