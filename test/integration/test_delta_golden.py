"""Public Delta tables written by Databricks' and Spark's Delta (the Delta project's golden tables,
``test/data/delta_golden/``, see test/data/SOURCES.md): profile, health, VACUUM and compaction on
each, read back by Spark 4.0.1 + Delta 4.0.0 and DuckDB's delta extension.

Each table exercises a feature new tables carry: deletion vectors (with a checkpoint, with column
mapping), column mapping by name and by id, timestamp_ntz under column mapping, v2 checkpoints
(JSON and Parquet, with sidecars), type widening (top-level and nested), variant, collations
(Databricks' `collations` and `collations-preview`, tables without data: profile, health and
VACUUM answer, compaction has nothing to do; Spark 4.0 reads them but cannot write them), and the
vacuum-protocol-check feature. Compaction rewrites every table whose features it supports —
rows identical for both readers, the commit an OPTIMIZE — and refuses the others naming the
feature, with nothing written.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import delta_tables as d
from test_delta import call, compact, dcon, error_of  # noqa: F401 (dcon: a fixture)

GOLDEN = Path(__file__).resolve().parent.parent / "data" / "delta_golden"
TINY_MB = 0.5  # every golden file is small; targets fit each partition in one file

# Table -> None (compacted) or the words the refusal must contain.
TABLES = {
    "basic-with-vacuum-protocol-check-feature": None,
    "collations-table": None,
    "collations-preview-table": None,
    "data-reader-timestamp_ntz-name-mode": None,
    "dv-partitioned-with-checkpoint": None,
    "dv-with-columnmapping": None,
    "table-with-columnmapping-mode-id": None,
    "table-with-columnmapping-mode-name": None,
    "type-widening": None,
    "type-widening-nested": None,
    "v2-checkpoint-json": None,
    "v2-checkpoint-parquet": None,
    "spark-variant-checkpoint": None,
}


# Peer bugs, asserted so the test notices when they are fixed: DuckDB reads these differently
# from Spark before any maintenance (and the same way after ours).
DUCKDB_MISREADS = {
    "data-reader-timestamp_ntz-name-mode": "delta 1.5.5 reads a timestamp_ntz partition column under column mapping as NULL",
}


# Tables Spark 4.0.1 + Delta 4.0.0 reads but does not write (a writer feature OSS Delta does not
# know: collations are Databricks-only): asserted, so the test notices when Delta learns it.
SPARK_CANNOT_WRITE = {"collations-table", "collations-preview-table"}


# Tables whose rows Python cannot compare across engines (maps keyed by arrays; maps and structs,
# which Spark collects as dicts and Rows, DuckDB as lists of pairs and dicts): each engine's JSON
# is compared with its own before and after.
NESTED_MAPS = {"table-with-columnmapping-mode-id", "table-with-columnmapping-mode-name", "type-widening-nested"}
# Variants, which DuckDB's delta extension reads as VARIANT and pyarrow cannot take from DuckDB
# ("Unsupported Arrow type VARIANT"): compared as each engine's JSON too.
UNCOMPARABLE = NESTED_MAPS | {"spark-variant-checkpoint"}


def spark_json(spark, path: Path, version: int | None = None) -> list[str]:
    """Rows as Spark's JSON, sorted (these tables have maps keyed by arrays, which Python's
    ``collect`` cannot build)."""
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", int(version))
    return sorted(reader.load(str(path)).toJSON().collect())


def duckdb_json(dcon, path: Path) -> list[str]:
    """Rows as DuckDB's JSON, sorted."""
    return sorted(r[0] for r in dcon.execute(f"SELECT to_json(t)::VARCHAR FROM delta_scan('{path}') AS t").fetchall())


def golden(name: str, tmp_path: Path) -> Path:
    return d.twin(GOLDEN / name, tmp_path / name)


def live_paths(dcon, path: Path) -> set[str]:
    return {os.path.normpath(r[0].removeprefix("file://")) for r in dcon.execute(
        "SELECT data_file FROM delta_list_files(?)", [str(path)]).fetchall()}


def test_every_golden_table_is_here():
    assert sorted(p.name for p in GOLDEN.iterdir() if p.is_dir()) == sorted(TABLES)


@pytest.mark.parametrize("name", sorted(TABLES))
def test_profile_health_and_vacuum_work_on_every_golden_table(con, dcon, name, tmp_path):
    """The profile counts DuckDB's live files; health answers; VACUUM's dry run lists no live
    file and nothing inside _delta_log."""
    path = golden(name, tmp_path)
    live = live_paths(dcon, path)
    rows = call(con, "lakehouse_fragmentation", path, small_file_threshold_mb=TINY_MB)
    assert sum(r["total_files"] for r in rows) == len(live), rows
    (health,) = call(con, "lakehouse_metadata_health", path)
    assert health["reason"], health
    listed = {r["path"] for r in call(con, "lakehouse_vacuum", path, retention_hours=0,
                                      enforce_retention_duration=False)}
    assert not listed & live, sorted(listed & live)
    assert not any("/_delta_log/" in p for p in listed), listed


@pytest.mark.parametrize("name", sorted(TABLES))
def test_compaction_of_every_golden_table(con, dcon, spark, name, tmp_path):
    """Supported: every partition with two or more small files (and every file with a deletion
    vector) rewritten, rows identical through Spark and DuckDB, time travel too, and Spark can
    still write. Refused: the error names the feature and nothing changes."""
    path = golden(name, tmp_path)
    refusal = TABLES[name]
    if refusal is not None:
        listing = d.listing(path)
        message = error_of(con, f"SELECT * FROM lakehouse_compact('{path}', small_file_threshold_mb := {TINY_MB})")
        assert "lakehouse_compact" in message and refusal in message, message
        assert d.listing(path) == listing
        return
    before_spark, before_duck = spark_json(spark, path), duckdb_json(dcon, path)
    agree = d.rows_spark(spark, path) == d.rows_duckdb(dcon, path) if name not in UNCOMPARABLE else None
    assert agree is None or agree != (name in DUCKDB_MISREADS), "DuckDB's delta extension changed: update this test"
    version = d.current_version(path)
    rows = compact(con, path, small_file_threshold_mb=TINY_MB, target_file_size_mb=TINY_MB, delete_ratio_threshold=0)
    compacted = [r for r in rows.values() if r["verdict"] == "compacted"]
    if compacted:
        assert d.current_version(path) == version + 1
        history = spark.sql(f"DESCRIBE HISTORY delta.`{path}` LIMIT 1").collect()[0]
        assert history["operation"] == "OPTIMIZE"
    assert spark_json(spark, path) == before_spark
    assert duckdb_json(dcon, path) == before_duck, "DuckDB reads the table as it did before"
    assert spark_json(spark, path, version=version) == before_spark, "time travel"
    vectors = dcon.execute("SELECT count(*) FILTER (WHERE have_deletes) FROM delta_list_files(?)", [str(path)]).fetchone()[0]
    assert vectors == 0, "delete_ratio_threshold 0 purges every vector"
    # Spark keeps writing on top of our commit.
    if name in SPARK_CANNOT_WRITE:
        with pytest.raises(Exception, match="DELTA_UNSUPPORTED_FEATURES_FOR_WRITE|unsupportedWriterTableFeatures"):
            d.spark_sql(spark, f"INSERT INTO delta.`{path}` SELECT * FROM delta.`{path}` LIMIT 1")
        return
    d.spark_sql(spark, f"INSERT INTO delta.`{path}` SELECT * FROM delta.`{path}` LIMIT 1")
    assert len(spark_json(spark, path)) == len(before_spark) + (1 if before_spark else 0)


def test_the_golden_tables_get_compacted(con, tmp_path):
    """The supported tables above are not compacted vacuously: these have something to rewrite."""
    for name in ("dv-partitioned-with-checkpoint", "dv-with-columnmapping", "v2-checkpoint-json", "spark-variant-checkpoint"):
        path = golden(name, tmp_path)
        rows = compact(con, path, small_file_threshold_mb=TINY_MB, target_file_size_mb=TINY_MB,
                       delete_ratio_threshold=0, dry_run=True)
        assert any(r["verdict"] == "would compact" for r in rows.values()), (name, rows)


def test_a_missing_deletion_vector_file_refuses_the_rewrite(con, tmp_path):
    """delta-io/delta's `table-with-dv-small` as the Delta repository keeps it
    (test/data/delta_missing_vector): its vector file is not where the log says (the repository's
    copy has another name). The profile still counts the vector; compaction names the missing
    file and writes nothing (DuckDB's delta extension cannot read the table either)."""
    path = d.twin(GOLDEN.parent / "delta_missing_vector", tmp_path / "t")
    (row,) = call(con, "lakehouse_fragmentation", path, small_file_threshold_mb=TINY_MB)
    assert row["delete_files"] == 1, row
    listing = d.listing(path)
    message = error_of(con, f"SELECT * FROM lakehouse_compact('{path}', small_file_threshold_mb := {TINY_MB}, "
                            "delete_ratio_threshold := 0)")
    assert "lakehouse_compact" in message and "deletion vector file" in message and "deletion_vector_" in message, message
    assert d.listing(path) == listing



def test_nested_widening_is_written_wide(con, dcon, tmp_path):
    """type-widening-nested widened struct.a, the map's key and value and the array's element from
    int to long: the rewritten file holds them as int64 (read by pyarrow), the rows DuckDB's delta
    extension reads are unchanged, and the schema with its delta.typeChanges is not rewritten."""
    import pyarrow.parquet as pq

    path = golden("type-widening-nested", tmp_path)
    before = duckdb_json(dcon, path)
    version = d.current_version(path)
    rows = compact(con, path, small_file_threshold_mb=TINY_MB, target_file_size_mb=TINY_MB)
    assert [r["verdict"] for r in rows.values()] == ["compacted"], rows
    actions = d.commit_actions(path, version + 1)
    assert not any("metaData" in a for a in actions)
    (add,) = [a["add"] for a in actions if "add" in a]
    schema = pq.read_schema(path / add["path"])
    assert str(schema.field("struct").type) == "struct<a: int64>", schema
    assert (str(schema.field("map").type.key_type), str(schema.field("map").type.item_type)) == ("int64", "int64")
    assert str(schema.field("array").type.value_type) == "int64", schema
    assert duckdb_json(dcon, path) == before
