"""The Spark executor on Delta tables: lakehouse_compact hands degraded partitions to Apache Spark
over Spark Connect as Delta Lake's own ``OPTIMIZE delta.`<path>` WHERE (…) OR (…)`` (the Connect
server of spark_connect.py: PySpark 4.0.1 with Delta Lake 4.0.0's extension), its session set to
our target and small-file threshold first.

Tables are written by Apache Spark (the classic session of spark.py, Delta by path), many small
files per partition. Checks, all through engines we did not write:

- the partitions sent go in one OPTIMIZE, whose one commit is Spark's (``engineInfo``) and adds
  and removes files of exactly the planned partitions (the log's actions, read by deltalake);
- string values with a quote and a backslash, dates and integers select their partition;
- the same rows before and after through Spark, deltalake and DuckDB's delta extension;
- a predicate that selects more than planned (test builds force one) is reported by name;
- what Delta's OPTIMIZE cannot do (the ``sort`` layout) stays local under ``auto`` and is refused
  under ``spark``.
"""

from __future__ import annotations

import collections
import json
from pathlib import Path

import pytest
from deltalake import DeltaTable

import delta_tables as d
from test_spark_executor import run

MIB = 1024 * 1024


@pytest.fixture
def dcon():
    con = d.delta_connection()
    yield con
    con.close()


def spark_delta_table(spark, path: Path, inserts: int = 3) -> None:
    """A Delta table by path, partitioned by a string and a date, ``inserts`` INSERTs of three
    tasks each (small files in every partition), and a partition of one file (nothing to do)."""
    spark.sql(
        f"CREATE TABLE delta.`{path}` (id bigint, region string, day date, n int, payload string) USING delta "
        "PARTITIONED BY (region, day)"
    )
    for i in range(inserts):
        spark.sql(
            f"INSERT INTO delta.`{path}` SELECT /*+ REPARTITION(3) */ id, "
            "CASE WHEN id % 2 = 0 THEN 'eu' ELSE 'o\\'r\\\\x' END, DATE '2026-11-01' + CAST(id % 4 >= 2 AS INT), "
            f"CAST(id AS INT), repeat('p', 64) FROM range({i * 400}, {(i + 1) * 400})"
        )
    spark.sql(f"INSERT INTO delta.`{path}` SELECT /*+ REPARTITION(1) */ 9999, 'solo', DATE '2026-11-05', 1, 'z'")


def healthy_partition(spark, path: Path) -> None:
    """Partition ``big``: five files over 1 MiB and two small ones — healthy at the 0.35 ratio, so
    not planned, though Delta's OPTIMIZE of the whole table would bin its two small files."""
    payload = "concat(" + ", ".join(f"md5(CAST(id * 7 + {k} AS STRING))" for k in range(8)) + ")"
    spark.sql(
        f"INSERT INTO delta.`{path}` SELECT /*+ REPARTITION(5) */ id, 'big', DATE '2026-11-09', 0, {payload} "
        "FROM range(0, 30000)"
    )
    spark.sql(f"INSERT INTO delta.`{path}` SELECT /*+ REPARTITION(2) */ id, 'big', DATE '2026-11-09', 0, 'x' FROM range(0, 4)")


def files_per_partition(path: Path) -> dict[str, int]:
    """Live files per partition label, as deltalake lists them."""
    return dict(collections.Counter(f.label for f in d.files_deltalake(path)))


def log_commit(path: Path, version: int) -> list[dict]:
    return [json.loads(line) for line in (path / "_delta_log" / f"{version:020}.json").read_text().splitlines() if line]


def rows(spark, dcon, path: Path) -> dict:
    return d.rows_everywhere(spark, dcon, path, polars=False)


def test_executor_spark_optimizes_exactly_the_degraded_partitions(con, dcon, spark, spark_connect, tmp_path):
    path = tmp_path / "events"
    spark_delta_table(spark, path)
    healthy_partition(spark, path)
    before_rows = rows(spark, dcon, path)
    before_files = files_per_partition(path)
    version = DeltaTable(str(path)).version()
    assert len(before_files) == 6 and all(n >= 3 for p, n in before_files.items() if "solo" not in p), before_files
    big = [f.size for f in d.files_deltalake(path) if f.label == "region=big/day=2026-11-09"]
    assert sorted(s > MIB for s in big) == [False] * 2 + [True] * 5, big

    params = dict(executor="spark", spark_remote=spark_connect.url, small_file_threshold_mb=1.0, target_file_size_mb=8.0)
    dry = run(con, "lakehouse_compact", str(path), dry_run=True, **params)
    planned = [r for r in dry if r["verdict"] == "would compact"]
    assert len(planned) == 4 and all(r["executor"] == "spark" for r in planned), dry
    assert {r["partition"]: r["verdict"] for r in dry}["region=big/day=2026-11-09"] == "healthy", dry
    assert all("where `region` = " in r["executor_reason"] for r in planned), [r["executor_reason"] for r in planned]
    assert any("'o\\'r\\\\x'" in r["executor_reason"] for r in planned), [r["executor_reason"] for r in planned]
    assert DeltaTable(str(path)).version() == version, "a dry run sends nothing"

    result = run(con, "lakehouse_compact", str(path), **params)
    compacted = [r for r in result if r["verdict"] == "compacted"]
    assert len(compacted) == 4 and all(r["executor"] == "spark" for r in compacted), result
    assert {r["snapshot_id"] for r in compacted} == {version + 1}, "one OPTIMIZE, one commit"
    assert all(r["files_after"] == 1 and r["bytes_rewritten"] > 0 for r in compacted), compacted
    assert DeltaTable(str(path)).version() == version + 1
    commit = log_commit(path, version + 1)
    info = next(a["commitInfo"] for a in commit if "commitInfo" in a)
    assert info["operation"] == "OPTIMIZE" and "Apache-Spark" in info.get("engineInfo", ""), info
    touched = {(a.get("add") or a.get("remove"))["partitionValues"]["region"] for a in commit if "add" in a or "remove" in a}
    assert touched == {"eu", "o'r\\x"}, touched
    after_files = files_per_partition(path)
    assert after_files["region=solo/day=2026-11-05"] == 1 and after_files["region=big/day=2026-11-09"] == 7
    assert all(n == 1 for p, n in after_files.items() if "big" not in p), after_files
    assert after_files.keys() == before_files.keys(), after_files
    assert rows(spark, dcon, path) == before_rows


def test_a_delta_optimize_beyond_the_planned_partitions_is_reported(con, dcon, spark, spark_connect, tmp_path, monkeypatch):
    # Test builds only: Spark gets a predicate that selects every partition, as a predicate bug
    # would; the call plans one partition (``partitions``), Spark's commit rewrites all four.
    path = tmp_path / "overstep"
    spark_delta_table(spark, path)
    before_rows = rows(spark, dcon, path)
    monkeypatch.setenv("LAKEHOUSE_TEST_SPARK_WHERE", "`region` IS NOT NULL")
    with pytest.raises(Exception) as err:
        run(con, "lakehouse_compact", str(path), executor="spark", spark_remote=spark_connect.url,
            small_file_threshold_mb=1.0, target_file_size_mb=8.0, partitions=["region=eu/day=2026-11-01"])
    message = str(err.value)
    assert "also rewrote 3 other partitions" in message and "which the gate did not plan" in message, message
    assert rows(spark, dcon, path) == before_rows


def test_what_optimize_cannot_do_stays_local_under_auto_and_is_refused_under_spark(con, dcon, spark, spark_connect, tmp_path):
    path = tmp_path / "sorted"
    spark_delta_table(spark, path, inserts=2)
    before_rows = rows(spark, dcon, path)
    params = dict(spark_remote=spark_connect.url, small_file_threshold_mb=1.0, target_file_size_mb=8.0,
                  strategy="sort", sort_order="id")
    with pytest.raises(Exception) as err:
        run(con, "lakehouse_compact", str(path), executor="spark", **params)
    assert "lakehouse_compact: " in str(err.value) and "Delta's OPTIMIZE has no sort" in str(err.value), str(err.value)
    result = run(con, "lakehouse_compact", str(path), executor="auto", local_max_partition_mb=0.0001, **params)
    compacted = [r for r in result if r["verdict"] == "compacted"]
    assert compacted and all(r["executor"] == "local" for r in compacted), result
    assert all("Delta's OPTIMIZE has no sort" in r["executor_reason"] for r in compacted), result
    assert rows(spark, dcon, path) == before_rows
