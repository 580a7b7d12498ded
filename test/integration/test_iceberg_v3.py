"""Iceberg format v3 compaction against Apache Spark 4.0 with Iceberg 1.10.1 (the reference
implementation), which writes every table here: merge-on-read DELETE, UPDATE and MERGE make
deletion vectors (Puffin), every row has a `_row_id` and a `_last_updated_sequence_number`
(Spark's metadata columns), and tables are upgraded from v1 and v2 by setting `format-version`.

After our compaction Spark reads the same rows, each with the same row id and last-updated
sequence number; DuckDB's iceberg extension and pyiceberg read the same rows; the deletion vectors of
rewritten files are gone; Spark keeps writing on top (new rows get ids past the table's
`next-row-id`). A deletion vector Spark adds while our commit is held back aborts it when it is on
a file we replace, and not when it is on another file.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import conftest as c
from test_foreign_tables import as_dicts

NS = "hc.ns"


def latest_metadata(table: Path) -> Path:
    versions = list((table / "metadata").glob("v*.metadata.json"))
    return max(versions, key=lambda p: int(p.name[1:].split(".")[0]))


def lineage(spark, ident: str) -> list[tuple]:
    """Every row as Spark reads it, with its row id and last-updated sequence number."""
    frame = spark.sql(f"SELECT to_json(struct(*)) AS row, _row_id, _last_updated_sequence_number FROM {ident}")
    return sorted(tuple(r) for r in frame.collect())


def duckdb_rows(iceberg_con, table: Path) -> list[tuple]:
    return sorted(iceberg_con.execute(f"SELECT * FROM iceberg_scan('{latest_metadata(table)}')").fetchall(), key=repr)


def pyiceberg_rows(table: Path) -> list[tuple]:
    from pyiceberg.table import StaticTable

    arrow = StaticTable.from_metadata(str(latest_metadata(table))).scan().to_arrow()
    return sorted((tuple(r.values()) for r in arrow.to_pylist()), key=repr)


def compact(con, table: Path, **options) -> list[dict]:
    force = {"small_file_threshold_mb": 1, "fragmentation_ratio_threshold": 0, **options}
    named = ", ".join(f"{k} := {v!r}" if isinstance(v, str) else f"{k} := {v}" for k, v in force.items())
    cursor = con.execute(f"SELECT * FROM lakehouse_compact('{table}', {named})")
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row)) for row in cursor.fetchall()]


def live_deletes(spark, ident: str) -> list[tuple]:
    return spark.sql(f"SELECT file_format, referenced_data_file FROM {ident}.delete_files").collect()


def mor_table(spark, warehouse: Path, name: str, partitioned: bool = True) -> tuple[str, Path]:
    """A v3 table of three partitions, eight small appends, then a DELETE, an UPDATE and a MERGE
    (merge-on-read: deletion vectors)."""
    ident = f"{NS}.{name}"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {NS}")
    spark.sql(f"DROP TABLE IF EXISTS {ident}")
    partitioning = "PARTITIONED BY (p)" if partitioned else ""
    spark.sql(
        f"CREATE TABLE {ident} (id bigint, p string, v string, ts timestamp_ntz) USING iceberg {partitioning} "
        "TBLPROPERTIES ('format-version'='3', 'write.delete.mode'='merge-on-read', "
        "'write.update.mode'='merge-on-read', 'write.merge.mode'='merge-on-read')"
    )
    for i in range(8):
        spark.sql(
            f"INSERT INTO {ident} SELECT id, concat('p', id % 3), concat('v', id), "
            f"timestamp_ntz'2026-01-01 00:00:00' + make_interval(0, 0, 0, 0, 0, 0, id) "
            f"FROM range({i * 50}, {i * 50 + 50})"
        )
    spark.sql(f"DELETE FROM {ident} WHERE id % 7 = 0")
    spark.sql(f"UPDATE {ident} SET v = concat(v, '-u') WHERE id % 11 = 0")
    spark.sql(
        f"MERGE INTO {ident} t USING (SELECT id, concat('m', id) AS v FROM range(0, 400, 13)) s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET v = s.v"
    )
    return ident, warehouse / "ns" / name


def test_spark_v3_table_compacts_keeping_rows_and_lineage(con, iceberg_con, spark, spark_warehouse):
    ident, table = mor_table(spark, spark_warehouse, "v3_mor")
    assert json.loads(latest_metadata(table).read_text())["format-version"] == 3
    vectors = live_deletes(spark, ident)
    assert vectors and all(f == "PUFFIN" for f, _ in vectors), vectors
    before, duck_before, py_before = lineage(spark, ident), duckdb_rows(iceberg_con, table), pyiceberg_rows(table)
    assert len(before) == 400 - len(range(0, 400, 7)) == len(py_before)
    next_row_id = json.loads(latest_metadata(table).read_text())["next-row-id"]

    plans = compact(con, table)
    assert sorted(p["verdict"] for p in plans) == ["compacted"] * 3, plans
    assert all("applying" in p["reason"] for p in plans), plans

    assert lineage(spark, ident) == before, "rows, row ids and last-updated sequence numbers"
    assert duckdb_rows(iceberg_con, table) == duck_before
    assert pyiceberg_rows(table) == py_before
    assert live_deletes(spark, ident) == [], "every deletion vector of a rewritten file left with it"
    files = spark.sql(f"SELECT count(*) FROM {ident}.files").collect()[0][0]
    assert files == 3
    written = json.loads(latest_metadata(table).read_text())
    snapshot = next(s for s in written["snapshots"] if s["snapshot-id"] == written["current-snapshot-id"])
    assert snapshot["summary"]["operation"] == "replace"
    assert snapshot["first-row-id"] == next_row_id
    assert written["next-row-id"] == next_row_id + snapshot["added-rows"]

    # Spark keeps writing on top: new rows get fresh ids, deletes make new vectors.
    spark.sql(f"INSERT INTO {ident} SELECT id, 'p0', 'new', timestamp_ntz'2026-02-01 00:00:00' FROM range(1000, 1010)")
    spark.sql(f"DELETE FROM {ident} WHERE id IN (1, 1000)")
    after = lineage(spark, ident)
    old = {json.loads(r)["id"]: (rid, seq) for r, rid, seq in after if json.loads(r)["id"] < 1000}
    assert old == {json.loads(r)["id"]: (rid, seq) for r, rid, seq in before if json.loads(r)["id"] != 1}
    new_ids = [rid for r, rid, _ in after if json.loads(r)["id"] >= 1000]
    assert len(new_ids) == 9 and min(new_ids) >= written["next-row-id"]
    assert len(duckdb_rows(iceberg_con, table)) == len(before) - 1 + 9


def test_a_second_compaction_keeps_the_lineage_it_wrote(con, iceberg_con, spark, spark_warehouse):
    """Rows already carrying physical `_row_id` columns (our first rewrite) are rewritten again,
    unpartitioned and sorted, with more vectors in between."""
    ident, table = mor_table(spark, spark_warehouse, "v3_twice", partitioned=False)
    compact(con, table)
    spark.sql(f"DELETE FROM {ident} WHERE id % 5 = 0")
    spark.sql(f"UPDATE {ident} SET v = 'again' WHERE id % 9 = 0")
    for i in range(3):
        spark.sql(f"INSERT INTO {ident} SELECT id, 'p1', 'late', timestamp_ntz'2026-03-01 00:00:00' FROM range({2000 + i * 5}, {2005 + i * 5})")
    before, duck_before, py_before = lineage(spark, ident), duckdb_rows(iceberg_con, table), pyiceberg_rows(table)
    plans = compact(con, table, sort_order="id DESC")
    assert [p["verdict"] for p in plans] == ["compacted"], plans
    assert lineage(spark, ident) == before
    assert duckdb_rows(iceberg_con, table) == duck_before
    assert pyiceberg_rows(table) == py_before
    assert live_deletes(spark, ident) == []


@pytest.mark.parametrize("old_version", [1, 2])
def test_tables_upgraded_to_v3_compact(con, iceberg_con, spark, spark_warehouse, old_version):
    """A v1 or v2 table (v2: with merge-on-read position deletes) upgraded to v3 by setting
    `format-version`: its old manifest lists and manifests (v1: no sequence numbers, counts
    that may be null) are read as Java reads them, old position deletes are applied, and the
    first v3 commit (ours) gives every row an id."""
    name = f"upgraded_v{old_version}"
    ident = f"{NS}.{name}"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {NS}")
    spark.sql(f"DROP TABLE IF EXISTS {ident}")
    props = f"'format-version'='{old_version}'"
    if old_version == 2:
        props += ", 'write.delete.mode'='merge-on-read'"
    spark.sql(f"CREATE TABLE {ident} (id bigint, v string) USING iceberg PARTITIONED BY (bucket(2, id)) TBLPROPERTIES ({props})")
    for i in range(5):
        spark.sql(f"INSERT INTO {ident} SELECT id, concat('v', id) FROM range({i * 20}, {i * 20 + 20})")
    spark.sql(f"DELETE FROM {ident} WHERE id % 6 = 0")
    for i in range(5, 8):  # v1 rewrote every file for the delete: more small files
        spark.sql(f"INSERT INTO {ident} SELECT id, concat('v', id) FROM range({i * 20}, {i * 20 + 20})")
    if old_version == 2:
        assert {f for f, _ in live_deletes(spark, ident)} == {"PARQUET"}
    spark.sql(f"ALTER TABLE {ident} SET TBLPROPERTIES ('format-version'='3')")
    table = spark_warehouse / "ns" / name
    assert json.loads(latest_metadata(table).read_text())["format-version"] == 3
    rows_before = sorted(r[0] for r in spark.sql(f"SELECT to_json(struct(*)) FROM {ident}").collect())
    if old_version == 1:
        # DuckDB's iceberg extension cannot read a v1 manifest list in a v3 table ("required
        # field 'sequence_number' is NULL"): its rows are compared with Spark's instead.
        with pytest.raises(Exception, match="sequence_number"):
            duckdb_rows(iceberg_con, table)
        duck_before = sorted(((d["id"], d["v"]) for d in map(json.loads, rows_before)), key=repr)
    else:
        duck_before = duckdb_rows(iceberg_con, table)

    plans = compact(con, table)
    assert sorted(p["verdict"] for p in plans) == ["compacted", "compacted"], plans

    after = lineage(spark, ident)
    assert sorted(r for r, _, _ in after) == rows_before
    assert duckdb_rows(iceberg_con, table) == duck_before
    ids = [rid for _, rid, _ in after]
    assert None not in ids and len(set(ids)) == len(ids), "every row has an id, no two the same"
    # Spark writes on top: a merge-on-read delete on the upgraded table is a deletion vector now.
    spark.sql(f"ALTER TABLE {ident} SET TBLPROPERTIES ('write.delete.mode'='merge-on-read')")
    spark.sql(f"DELETE FROM {ident} WHERE id = 1")
    assert {f for f, _ in live_deletes(spark, ident)} == {"PUFFIN"}
    kept = {json.loads(r)["id"]: (rid, seq) for r, rid, seq in lineage(spark, ident)}
    assert kept == {json.loads(r)["id"]: (rid, seq) for r, rid, seq in after if json.loads(r)["id"] != 1}


def test_variant_tables_are_refused_naming_the_type(con, spark, spark_warehouse):
    ident = f"{NS}.v3_variant"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {NS}")
    spark.sql(f"DROP TABLE IF EXISTS {ident}")
    spark.sql(f"CREATE TABLE {ident} (id bigint, doc variant) USING iceberg TBLPROPERTIES ('format-version'='3')")
    for i in range(3):
        spark.sql(f"INSERT INTO {ident} SELECT id, parse_json(concat('{{\"a\":', id, '}}')) FROM range({i}, {i + 1})")
    with pytest.raises(Exception, match=r"lakehouse_compact: compaction cannot rewrite columns of type 'doc' \(variant\)"):
        compact(con, spark_warehouse / "ns" / "v3_variant")


def concurrent_vector(con, spark, spark_warehouse, monkeypatch, name: str, on_replaced: bool) -> tuple[dict, str, Path]:
    """Compacts partition `p0` of a fresh table while Spark deletes rows of partition `p0`
    (a file we replace: its vector is replaced) or of `p1` (not compacted)."""
    ident, table = mor_table(spark, spark_warehouse, name)
    target = "p0" if on_replaced else "p1"
    existing = set(table.rglob("*-compacted.parquet"))

    def run():
        return compact(con, table, partitions=["p=p0"])

    def concurrent_change():
        spark.sql(f"DELETE FROM {ident} WHERE p = '{target}' AND id % 10 = 1")

    outcome = c.run_paused_before_commit(
        run, concurrent_change, lambda: bool(set(table.rglob("*-compacted.parquet")) - existing), monkeypatch,
        pause_ms=20000,
    )
    return outcome, ident, table


def test_a_vector_spark_replaces_on_a_file_we_rewrite_aborts_our_commit(con, spark, spark_warehouse, monkeypatch):
    outcome, ident, table = concurrent_vector(con, spark, spark_warehouse, monkeypatch, "v3_race_same", True)
    assert outcome["paused"], outcome
    assert "a delete committed while compacting" in outcome.get("error", ""), outcome
    rows = spark.sql(f"SELECT id FROM {ident} WHERE p = 'p0' AND id % 10 = 1").collect()
    assert rows == [], "nothing Spark deleted came back"
    assert not list(table.rglob("*-compacted.parquet")), "our rewritten files were removed"


def test_a_vector_spark_adds_on_another_file_lets_our_commit_land(con, spark, spark_warehouse, monkeypatch):
    outcome, ident, table = concurrent_vector(con, spark, spark_warehouse, monkeypatch, "v3_race_other", False)
    assert outcome["paused"], outcome
    assert "error" not in outcome, outcome
    assert [p["verdict"] for p in outcome["rows"] if p["partition"] == "p=p0"] == ["compacted"], outcome
    assert spark.sql(f"SELECT id FROM {ident} WHERE id % 10 = 1 AND p = 'p1'").collect() == []
    assert spark.sql(f"SELECT count(*) FROM {ident}.delete_files WHERE partition.p = 'p0'").collect()[0][0] == 0


def test_expiry_cleans_the_specs_and_schemas_no_snapshot_uses(con, iceberg_con, spark, spark_warehouse):
    """`clean_expired_metadata := true` (Java 1.10's option): once the snapshots written with the
    first partition spec and schema are expired, both are dropped from the metadata; the default
    spec and current schema stay, and Spark and DuckDB read and Spark writes as before."""
    ident = f"{NS}.v3_clean"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {NS}")
    spark.sql(f"DROP TABLE IF EXISTS {ident}")
    spark.sql(f"CREATE TABLE {ident} (id bigint, p string) USING iceberg PARTITIONED BY (p) "
              "TBLPROPERTIES ('format-version'='3')")
    for i in range(3):
        spark.sql(f"INSERT INTO {ident} VALUES ({i}, 'a{i}')")
    spark.sql(f"ALTER TABLE {ident} ADD COLUMN extra string")
    spark.sql(f"ALTER TABLE {ident} DROP PARTITION FIELD p")
    spark.sql(f"DELETE FROM {ident} WHERE true")
    for i in range(3, 5):
        spark.sql(f"INSERT INTO {ident} VALUES ({i}, 'b', 'x{i}')")
    table = spark_warehouse / "ns" / "v3_clean"
    before = json.loads(latest_metadata(table).read_text())
    assert [s["spec-id"] for s in before["partition-specs"]] == [0, 1]
    assert [s["schema-id"] for s in before["schemas"]] == [0, 1]
    rows, duck = lineage(spark, ident), duckdb_rows(iceberg_con, table)

    def expire(dry: bool, clean: bool = True) -> list[tuple]:
        return con.execute(
            f"SELECT kind, path, action FROM lakehouse_expire_snapshots('{table}', snapshot_retention_days := 0, "
            f"clean_expired_metadata := {clean}, dry_run := {dry}) WHERE kind IN ('partition_spec', 'schema')"
        ).fetchall()

    assert expire(dry=True, clean=False) == []
    assert expire(dry=True) == [("partition_spec", "partition_spec 0", "would remove: unused"),
                                ("schema", "schema 0", "would remove: unused")]
    assert json.loads(latest_metadata(table).read_text()) == before, "a dry run commits nothing"
    assert expire(dry=False) == [("partition_spec", "partition_spec 0", "removed: unused"),
                                 ("schema", "schema 0", "removed: unused")]
    after = json.loads(latest_metadata(table).read_text())
    assert [s["spec-id"] for s in after["partition-specs"]] == [1] and after["default-spec-id"] == 1
    assert [s["schema-id"] for s in after["schemas"]] == [1] and after["current-schema-id"] == 1
    assert lineage(spark, ident) == rows
    assert duckdb_rows(iceberg_con, table) == duck
    spark.sql(f"INSERT INTO {ident} VALUES (9, 'c', 'x9')")
    assert len(lineage(spark, ident)) == len(rows) + 1


def test_a_column_added_with_a_default_reads_as_the_default_after_compaction(con, iceberg_con, spark, spark_warehouse):
    """A v3 column added through Iceberg's Java API with `initial-default` 7 (Spark 4.0's DDL
    cannot set one): the files written before it read as 7 — through Spark and DuckDB, before and
    after our compaction, which writes the 7 into the new file."""
    ident = f"{NS}.v3_default"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {NS}")
    spark.sql(f"DROP TABLE IF EXISTS {ident}")
    spark.sql(f"CREATE TABLE {ident} (id bigint) USING iceberg TBLPROPERTIES ('format-version'='3')")
    for i in range(3):
        spark.sql(f"INSERT INTO {ident} VALUES ({i})")
    jvm = spark._jvm
    table = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, ident)
    seven = jvm.org.apache.iceberg.expressions.Literal.of(7)
    table.updateSchema().addColumn("c", jvm.org.apache.iceberg.types.Types.IntegerType.get(), "added", seven).commit()
    spark.sql(f"INSERT INTO {ident} VALUES (3, 1)")
    table_dir = spark_warehouse / "ns" / "v3_default"
    before, duck = lineage(spark, ident), duckdb_rows(iceberg_con, table_dir)
    assert sorted(json.loads(r)["c"] for r, _, _ in before) == [1, 7, 7, 7], before
    assert sorted(c for _, c in duck) == [1, 7, 7, 7], "DuckDB honours the default too"
    plans = compact(con, table_dir)
    assert [p["verdict"] for p in plans] == ["compacted"], plans
    assert lineage(spark, ident) == before
    assert duckdb_rows(iceberg_con, table_dir) == duck


def test_nested_fields_added_with_defaults_are_written_as_readers_see_them(con, iceberg_con, spark, spark_warehouse):
    """Struct fields added through Iceberg's Java API with an `initial-default` (`s.f` 5,
    `s.t.g` 'dflt' one struct deeper, `l.element.b` 7 in a list's elements) after three files were
    written: in those files Spark and Iceberg's generic reader see the default wherever the parent
    struct is not NULL, and NULL where it is (NULL lists and elements stay NULL). Our compaction writes exactly that into the new file (pyarrow reads it there, so
    readers that ignore defaults see it too); Spark's and Java's rows, row ids and sequence
    numbers are unchanged."""
    from java_iceberg import JavaTable
    import pyarrow.parquet as pq

    ident = f"{NS}.v3_nested_default"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {NS}")
    spark.sql(f"DROP TABLE IF EXISTS {ident}")
    spark.sql(f"CREATE TABLE {ident} (id bigint, s struct<x: int, t: struct<y: int>>, l array<struct<a: int>>) "
              "USING iceberg TBLPROPERTIES ('format-version'='3')")
    for values in ["(0, named_struct('x', 1, 't', named_struct('y', 1)), array(named_struct('a', 0), NULL)), "
                   "(1, NULL, NULL)",
                   "(2, named_struct('x', NULL, 't', NULL), array())",
                   "(3, named_struct('x', 3, 't', named_struct('y', NULL)), array(named_struct('a', NULL)))"]:
        spark.sql(f"INSERT INTO {ident} VALUES {values}")
    jvm = spark._jvm
    table = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, ident)
    types, literal = jvm.org.apache.iceberg.types.Types, jvm.org.apache.iceberg.expressions.Literal
    (table.updateSchema().addColumn("s", "f", types.IntegerType.get(), "added", literal.of(5))
     .addColumn("s.t", "g", types.StringType.get(), "added", literal.of("dflt"))
     .addColumn("l", "b", types.IntegerType.get(), "added", literal.of(7)).commit())
    spark.sql(f"INSERT INTO {ident} VALUES (4, named_struct('x', 4, 't', named_struct('y', 4, 'g', 'new'), 'f', 9), "
              "array(named_struct('a', 4, 'b', 8)))")
    table_dir = spark_warehouse / "ns" / "v3_nested_default"
    java = JavaTable(spark, str(table_dir))
    before, java_before = lineage(spark, ident), java.rows()
    seen = {json.loads(r)["id"]: json.loads(r).get("s") for r, _, _ in before}
    lists = {json.loads(r)["id"]: json.loads(r).get("l") for r, _, _ in before}
    assert lists == {0: [{"a": 0, "b": 7}, None], 1: None, 2: [], 3: [{"b": 7}], 4: [{"a": 4, "b": 8}]}, lists
    assert seen == {0: {"x": 1, "t": {"y": 1, "g": "dflt"}, "f": 5}, 1: None,
                    2: {"f": 5}, 3: {"x": 3, "t": {"g": "dflt"}, "f": 5},
                    4: {"x": 4, "t": {"y": 4, "g": "new"}, "f": 9}}, seen

    plans = compact(con, table_dir)
    assert [p["verdict"] for p in plans] == ["compacted"], plans
    assert lineage(spark, ident) == before
    assert java.rows() == java_before
    [written] = java.live_files()
    stored = pq.read_table(str(written.location()).removeprefix("file:"), columns=["id", "s", "l"]).to_pylist()
    assert {r["id"]: r["l"] for r in stored} == {0: [{"a": 0, "b": 7}, None], 1: None, 2: [], 3: [{"a": None, "b": 7}],
                                                 4: [{"a": 4, "b": 8}]}
    assert sorted((r["id"], r["s"] and r["s"]["f"], r["s"] and r["s"]["t"] and r["s"]["t"]["g"]) for r in stored) == [
        (0, 5, "dflt"), (1, None, None), (2, 5, None), (3, 5, "dflt"), (4, 9, "new")]


def test_manifest_rewrite_keeps_rows_and_lineage(con, iceberg_con, spark, spark_warehouse):
    """The manifest merge on Spark's v3 table (eight appends, deletion vectors: a data and a
    delete manifest per commit) merges them into one of each and Spark reads every row with the
    same row id and last-updated sequence number (data files that inherited their first row id
    from a manifest keep it, written into the merged entry); Spark keeps writing on top."""
    ident, table = mor_table(spark, spark_warehouse, "v3_manifests")
    before, duck_before, py_before = lineage(spark, ident), duckdb_rows(iceberg_con, table), pyiceberg_rows(table)
    manifests_before = spark.sql(f"SELECT content, count(*) FROM {ident}.manifests GROUP BY content").collect()
    assert all(n > 1 for _, n in manifests_before), manifests_before

    groups = as_dicts(con.execute(f"SELECT * FROM lakehouse_rewrite_manifests('{table}')"))
    assert {g["content"] for g in groups if g["action"] == "merged"} == {"data", "deletes"}, groups

    assert lineage(spark, ident) == before, "rows, row ids and last-updated sequence numbers"
    assert duckdb_rows(iceberg_con, table) == duck_before
    assert pyiceberg_rows(table) == py_before
    after = dict(spark.sql(f"SELECT content, count(*) FROM {ident}.manifests GROUP BY content").collect())
    assert after == {0: 1, 1: 1}, after
    spark.sql(f"INSERT INTO {ident} SELECT id, 'p0', 'new', timestamp_ntz'2026-02-01 00:00:00' FROM range(1000, 1010)")
    assert len(lineage(spark, ident)) == len(before) + 10
