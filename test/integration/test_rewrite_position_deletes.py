"""lakehouse_rewrite_position_deletes against Apache Spark 4.0 with Iceberg 1.10.1, which writes
every table here (merge-on-read DELETEs, partition-granularity position delete files, Spark's own
`rewrite_data_files` leaving deletes dangling, a v2 table upgraded to v3).

After our rewrite Spark and DuckDB's iceberg extension read the same rows (and, on v3, every
row keeps its `_row_id`); Spark's `delete_files` metadata table shows what we wrote; Spark keeps
writing on top.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from test_foreign_tables import INFO, newest, read_rows, readers_for, relocated

NS = "hc.ns"


def latest_metadata(table: Path) -> Path:
    versions = list((table / "metadata").glob("v*.metadata.json"))
    return max(versions, key=lambda p: int(p.name[1:].split(".")[0]))


def spark_rows(spark, ident: str, lineage: bool = False) -> list:
    extra = ", _row_id" if lineage else ""
    return sorted(tuple(r) for r in spark.sql(f"SELECT to_json(struct(*)){extra} FROM {ident}").collect())


def duckdb_rows(iceberg_con, table: Path) -> list:
    return sorted(iceberg_con.execute(f"SELECT * FROM iceberg_scan('{latest_metadata(table)}')").fetchall(), key=repr)


def deletes(spark, ident: str) -> list[tuple]:
    rows = spark.sql(f"SELECT partition.p, file_format, record_count FROM {ident}.delete_files").collect()
    return sorted(tuple(r) for r in rows)


def rewrite(con, table: Path, **options) -> list[dict]:
    named = "".join(f", {k} := {v}" for k, v in options.items())
    cursor = con.execute(f"SELECT * FROM lakehouse_rewrite_position_deletes('{table}'{named})")
    names = [d[0] for d in cursor.description]
    return sorted((dict(zip(names, r)) for r in cursor.fetchall()), key=lambda r: r["partition"])


def mor_table(spark, warehouse: Path, name: str, version: int = 2) -> tuple[str, Path]:
    """Two partitions, six small appends, three DELETEs: three position delete files per
    partition (partition granularity: each names several data files)."""
    ident = f"{NS}.{name}"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {NS}")
    spark.sql(f"DROP TABLE IF EXISTS {ident}")
    spark.sql(
        f"CREATE TABLE {ident} (id bigint, p string, v string) USING iceberg PARTITIONED BY (p) "
        f"TBLPROPERTIES ('format-version'='{version}', 'write.delete.mode'='merge-on-read', "
        "'write.delete.granularity'='partition')"
    )
    for i in range(6):
        spark.sql(f"INSERT INTO {ident} SELECT id, concat('p', id % 2), concat('v', id) FROM range({i * 40}, {i * 40 + 40})")
    for k in (3, 5, 7):
        spark.sql(f"DELETE FROM {ident} WHERE id % {k} = 1")
    return ident, warehouse / "ns" / name


def test_v2_position_deletes_are_merged_per_partition(con, iceberg_con, spark, spark_warehouse):
    ident, table = mor_table(spark, spark_warehouse, "posdel_v2")
    before = deletes(spark, ident)
    assert [(p, f) for p, f, _ in before] == [("p0", "PARQUET")] * 3 + [("p1", "PARQUET")] * 3, before
    rows, duck = spark_rows(spark, ident), duckdb_rows(iceberg_con, table)

    dry = rewrite(con, table, dry_run=True)
    assert [(r["partition"], r["action"], r["delete_files_before"]) for r in dry] == [
        ("p=p0", "would rewrite", 3), ("p=p1", "would rewrite", 3)], dry
    assert deletes(spark, ident) == before, "a dry run commits nothing"
    assert [r["action"] for r in rewrite(con, table, min_input_files=4)] == ["kept", "kept"]

    done = rewrite(con, table)
    assert [(r["action"], r["delete_files_after"]) for r in done] == [("rewritten", 1), ("rewritten", 1)], done
    # Every position still deletes a live row (Spark deletes each row once): all are kept.
    after = deletes(spark, ident)
    assert [(p, f) for p, f, _ in after] == [("p0", "PARQUET"), ("p1", "PARQUET")]
    assert [n for _, _, n in after] == [r["deletes_after"] for r in done]
    assert sum(n for _, _, n in after) == sum(n for _, _, n in before)
    assert spark_rows(spark, ident) == rows
    assert duckdb_rows(iceberg_con, table) == duck
    snapshot = json.loads(latest_metadata(table).read_text())
    current = next(s for s in snapshot["snapshots"] if s["snapshot-id"] == snapshot["current-snapshot-id"])
    assert current["summary"]["operation"] == "replace"
    # Spark deletes again on top.
    spark.sql(f"DELETE FROM {ident} WHERE id = 2")
    assert len(spark_rows(spark, ident)) == len(rows) - 1


def test_positions_left_dangling_by_spark_compaction_are_dropped(con, iceberg_con, spark, spark_warehouse):
    """Spark's rewrite_data_files applies the deletes but keeps delete files (its
    `remove-dangling-deletes` is false): every position they hold names a file no longer live."""
    ident, table = mor_table(spark, spark_warehouse, "posdel_dangling")
    spark.sql(f"CALL hc.system.rewrite_data_files(table => 'ns.posdel_dangling', options => map('min-input-files', '2'))")
    left = deletes(spark, ident)
    assert {p for p, _, _ in left} == {"p0", "p1"}, left
    rows, duck = spark_rows(spark, ident), duckdb_rows(iceberg_con, table)
    done = rewrite(con, table)
    assert [(r["action"], r["delete_files_after"], r["deletes_after"]) for r in done] == [
        ("rewritten", 0, 0), ("rewritten", 0, 0)], done
    assert deletes(spark, ident) == []
    assert spark_rows(spark, ident) == rows
    assert duckdb_rows(iceberg_con, table) == duck


def test_on_v3_position_deletes_become_deletion_vectors(con, iceberg_con, spark, spark_warehouse):
    """A v2 table with partition-granularity position deletes, upgraded to v3, then a Spark DELETE
    that gives one data file a deletion vector: every position delete becomes a vector, the
    existing vector merged in; rows and row ids unchanged; Spark deletes on top."""
    ident, table = mor_table(spark, spark_warehouse, "posdel_v3")
    spark.sql(f"ALTER TABLE {ident} SET TBLPROPERTIES ('format-version'='3')")
    spark.sql(f"DELETE FROM {ident} WHERE id = 12")  # a live row (no earlier DELETE took it)
    kinds = {f for _, f, _ in deletes(spark, ident)}
    assert kinds == {"PARQUET", "PUFFIN"}, deletes(spark, ident)
    rows, duck = spark_rows(spark, ident, lineage=True), duckdb_rows(iceberg_con, table)

    done = rewrite(con, table)
    assert all(r["action"] == "rewritten" for r in done), done
    assert done[0]["deletion_vectors_replaced"] >= 1, done
    after = deletes(spark, ident)
    assert {f for _, f, _ in after} == {"PUFFIN"}, after
    referenced = [r[0] for r in spark.sql(f"SELECT referenced_data_file FROM {ident}.delete_files").collect()]
    assert len(referenced) == len(set(referenced)), "one vector per data file"
    assert spark_rows(spark, ident, lineage=True) == rows
    assert duckdb_rows(iceberg_con, table) == duck
    spark.sql(f"DELETE FROM {ident} WHERE id IN (14, 18)")
    want = [r for r in rows if json.loads(r[0])["id"] not in (14, 18)]
    assert spark_rows(spark, ident, lineage=True) == want


def test_the_gate_rewrites_bloated_position_deletes(con, iceberg_con, spark, spark_warehouse):
    """No partition is degraded (no file counts as small), so nothing is compacted, but each has
    three position delete files: the gate merges them, and says so in its rows."""
    ident, table = mor_table(spark, spark_warehouse, "posdel_gate")
    rows, duck = spark_rows(spark, ident), duckdb_rows(iceberg_con, table)
    cursor = con.execute(
        f"SELECT * FROM lakehouse_gate('{table}', small_file_threshold_mb := 0.0001, snapshot_retention_days := 30, "
        "measure_speedup := false)"
    )
    names = [d[0] for d in cursor.description]
    out = [dict(zip(names, r)) for r in cursor.fetchall()]
    assert {r["verdict"] for r in out} == {"healthy"}, out
    assert out[0]["delete_files_rewritten"] == 6 and out[0]["delete_rewrite_snapshot_id"] is not None, out
    assert out[0]["status"] == "maintained"
    assert [(p, f) for p, f, _ in deletes(spark, ident)] == [("p0", "PARQUET"), ("p1", "PARQUET")]
    assert spark_rows(spark, ident) == rows
    assert duckdb_rows(iceberg_con, table) == duck


EQUALITY_FIXTURES = sorted(n for n, info in INFO.items() if info["current_live_equality_delete_files"])


@pytest.mark.parametrize("name", EQUALITY_FIXTURES)
def test_equality_deletes_of_other_engines_are_converted_into_positions(con, iceberg_con, spark, tmp_path, name):
    """Flink's, the Java API's and Impala's equality deletes (the fixtures): with
    `convert_equality_deletes := true` every partition-scoped one becomes positions of the rows it
    deletes; Spark and DuckDB (and pyiceberg where it can) read the same rows."""
    metadata = relocated(name, tmp_path)
    readers = readers_for(name)
    before = {r: read_rows(r, iceberg_con, str(metadata), spark) for r in readers}
    health = con.execute(f"SELECT equality_delete_files FROM lakehouse_metadata_health('{metadata}')").fetchone()[0]
    assert health > 0
    done = rewrite(con, metadata, convert_equality_deletes="true")
    assert any("equality" in r["reason"] and r["action"] == "rewritten" for r in done), done
    latest = metadata.parent / newest(metadata)
    for reader in readers:
        assert read_rows(reader, iceberg_con, str(latest), spark) == before[reader], reader
    left = con.execute(f"SELECT equality_delete_files FROM lakehouse_metadata_health('{latest}')").fetchone()[0]
    assert left < health, (left, health)
