"""VARIANT columns in Delta tables: compaction copies their row groups byte for byte (row-group
stitching) and never lets DuckDB decode them; a partition whose files cannot be stitched
(deletion vectors, too few files, another Parquet schema, ``stitch := false``, a sorted layout)
is skipped naming the variant column and why.

Writers we did not write build every table: Spark 4.0.1 + Delta 4.0.0 (unshredded, unannotated
variants, deletion vectors) and Databricks Runtime (shredded, ``VARIANT(1)``-annotated, with
variant min/max stats: ``test/data/delta_variant_shredded``, see test/data/SOURCES.md). Spark
(``to_json``, ``variant_get``) and DuckDB's delta extension read the rows before and after;
pyarrow reads the raw ``metadata``/``value``/``typed_value`` binaries of the old and new files,
which must be equal row for row, under the same Parquet schema. Under column mapping the
variant's parts carry no field id (as Spark writes them) and are stitched all the same.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import delta_tables as d
from test_delta import compact, dcon  # noqa: F401 (dcon: a fixture)

SHREDDED = Path(__file__).resolve().parent.parent / "data" / "delta_variant_shredded"

# JSON documents Spark's parse_json encodes with every kind of value: nested objects and
# arrays, long and short strings, decimals, big integers, floats, booleans, JSON null.
DOCS = [
    '{"a": 1, "b": "short"}',
    '{"a": 2, "b": "' + "x" * 100 + '", "c": [1, 2.5, null, true, {"d": "e"}]}',
    '{"a": 3, "n": {"deep": {"deeper": [10000000000, -1, 0.000123]}}}',
    '[1, "two", {"three": 3}]',
    '"just a string"',
    "12345678901234567890.123",
    "null",
    '{"z": 1, "y": 2, "x": 3, "a": 4}',
]


def spark_rows(spark, path: Path) -> list[tuple]:
    return sorted(tuple(r) for r in spark.sql(
        f"SELECT id, p, to_json(v), variant_get(v, '$.a', 'int'), variant_get(v, '$.b', 'string') "
        f"FROM delta.`{path}`").collect())


def duckdb_rows(dcon, path: Path) -> list[tuple]:
    """Rows per DuckDB's ``delta_scan`` (its VARIANT as text)."""
    return sorted(dcon.execute(f"SELECT id, p, v::VARCHAR FROM delta_scan('{path}')").fetchall())


def live_files(path: Path) -> list[str]:
    from deltalake import DeltaTable

    return sorted(u.removeprefix("file://") for u in DeltaTable(str(path)).file_uris())


def raw_variants(files: list[str], key: str, column: str) -> dict:
    """``key`` → the raw binaries of every leaf under variant ``column`` (pyarrow, our code not
    involved), over the rows of ``files``."""
    out = {}
    for f in files:
        table = pq.read_table(f)
        leaves = [n for n in table.flatten().flatten().flatten().column_names if n.startswith(column + ".")]
        flat = table.flatten().flatten().flatten()
        for i, k in enumerate(flat.column(key).to_pylist()):
            assert k not in out, k
            out[k] = {n: flat.column(n)[i].as_py() for n in leaves}
    return out


def schema_of(path: str) -> str:
    """The file's Parquet schema as pyarrow prints it (names, repetition, annotations, ids)."""
    return str(pq.ParquetFile(path).schema).split("\n", 1)[1]


def adds(path: Path, version: int) -> list[dict]:
    return [a["add"] for a in d.commit_actions(path, version) if "add" in a]


@pytest.fixture(scope="module")
def spark_variant_table(spark, tmp_path_factory) -> Path:
    """Spark: ``(id int, p string, v variant)`` partitioned by ``p``, deletion vectors on; four
    INSERTs of two tasks (two files per partition each), then a DELETE in 'b' (vectors)."""
    path = tmp_path_factory.mktemp("delta-variant") / "t"
    t = f"delta.`{path}`"
    d.spark_sql(spark, f"CREATE TABLE {t} (id int, p string, v variant) USING delta PARTITIONED BY (p) "
                       "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    docs = "array(" + ", ".join("'" + doc.replace("'", "\\'") + "'" for doc in DOCS) + ")"
    for k in range(4):
        d.spark_sql(spark, f"""INSERT INTO {t} SELECT /*+ REPARTITION(2) */ CAST(id AS INT), IF(id % 2 = 0, 'a', 'b'),
                    IF(id % 9 = 4, NULL, parse_json(element_at({docs}, CAST(id % {len(DOCS)} AS INT) + 1)))
                    FROM range({k * 100}, {k * 100 + 24})""")
    d.spark_sql(spark, f"DELETE FROM {t} WHERE p = 'b' AND id % 5 = 0")
    return path


def test_spark_variant_files_are_stitched_byte_for_byte(con, dcon, spark, spark_variant_table, tmp_path):  # noqa: F811
    path = d.twin(spark_variant_table, tmp_path / "t")
    before = spark_rows(spark, path)
    duckdb_before = duckdb_rows(dcon, path)
    files_before = live_files(path)
    raw_before = raw_variants(files_before, "id", "v")
    schema_before = {schema_of(f) for f in files_before}
    assert len(schema_before) == 1, schema_before
    assert "variant" not in next(iter(schema_before)).lower(), "Spark 4.0 writes no VARIANT annotation"
    version = d.current_version(path)

    # Loading DuckDB's delta extension makes DuckDB read Spark's variant groups as VARIANT in
    # this database; nothing of the rewrite reads them through DuckDB, so nothing changes.
    d.load_delta(con)
    dry = compact(con, path, small_file_threshold_mb=1, stitch=False, dry_run=True)
    assert {r["verdict"] for r in dry.values()} == {"skipped"}, dry
    assert all("column 'v' is a variant" in r["reason"] and "stitch := false" in r["reason"] for r in dry.values()), dry

    rows = compact(con, path, small_file_threshold_mb=1)
    a, b = rows["p=a"], rows["p=b"]
    assert (a["verdict"], a["method"], a["input_files"], a["output_files"]) == ("compacted", "stitch", 8, 1), a
    assert b["verdict"] == "skipped" and "column 'v' is a variant" in b["reason"], b
    assert "deletion vector" in b["reason"], b
    assert d.current_version(path) == version + 1

    # Spark and DuckDB read the same rows; the binaries are the writer's, under its schema.
    assert spark_rows(spark, path) == before
    assert duckdb_rows(dcon, path) == duckdb_before
    files_after = live_files(path)
    [new] = [f for f in files_after if f not in files_before]
    assert schema_of(new) == next(iter(schema_before))
    assert raw_variants(files_after, "id", "v") == raw_before
    [add] = adds(path, version + 1)
    stats = json.loads(add["stats"])
    assert "v" not in stats["minValues"] and "v" not in stats["maxValues"] and "v" not in stats["nullCount"], stats
    assert stats["numRecords"] == len([r for r in before if r[1] == "a"])
    history = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()
    assert history[0]["operation"] == "OPTIMIZE"
    # Spark keeps writing to the table.
    d.spark_sql(spark, f"INSERT INTO delta.`{path}` SELECT id + 1000, p, v FROM delta.`{path}` WHERE p = 'a' LIMIT 3")
    assert len(spark_rows(spark, path)) == len(before) + 3


def test_variant_parts_need_no_field_id_under_column_mapping(con, spark, tmp_path):
    """Under column mapping Spark gives the variant group a field id and its ``value``/``metadata``
    none (a variant's parts are read by name); stitching accepts that, and only that."""
    path = tmp_path / "mapped"
    t = f"delta.`{path}`"
    d.spark_sql(spark, f"CREATE TABLE {t} (id bigint, v variant) USING delta "
                       "TBLPROPERTIES ('delta.columnMapping.mode' = 'name')")
    for k in range(3):
        d.spark_sql(spark, f"INSERT INTO {t} SELECT /*+ REPARTITION(1) */ id, "
                           f"parse_json(concat('{{\"a\": ', id, ', \"s\": \"', repeat('x', id), '\"}}')) "
                           f"FROM range({k * 10}, {k * 10 + 5})")
    query = f"SELECT id, to_json(v) FROM {t}"
    before = sorted(tuple(r) for r in spark.sql(query).collect())
    files_before = live_files(path)
    [schema] = {schema_of(f) for f in files_before}
    assert "field_id=2 col-" in schema and "binary field_id=-1 value" in schema, schema
    # Physical names: `col-<uuid>` for id, then for v.
    id_column, v_column = pq.read_schema(files_before[0]).names
    raw_before = raw_variants(files_before, id_column, v_column)

    rows = compact(con, path, small_file_threshold_mb=1)
    [r] = rows.values()
    assert (r["verdict"], r["method"], r["input_files"]) == ("compacted", "stitch", 3), r
    assert sorted(tuple(r) for r in spark.sql(query).collect()) == before
    files_after = live_files(path)
    assert len(files_after) == 1 and schema_of(files_after[0]) == schema
    assert raw_variants(files_after, id_column, v_column) == raw_before


def shredded_table(tmp_path: Path, enabled: bool = True) -> Path:
    path = d.twin(SHREDDED, tmp_path / "shredded")
    if not enabled:
        # The same files in a table that supports shredding but does not enable it.
        log = path / "_delta_log" / f"{0:020}.json"
        lines = [json.loads(line) for line in log.read_text().splitlines()]
        for action in lines:
            if "metaData" in action:
                action["metaData"]["configuration"].pop("delta.enableVariantShredding")
        log.write_text("".join(json.dumps(a) + "\n" for a in lines))
        for crc in (path / "_delta_log").glob("*.crc"):
            crc.unlink()
        for crc in (path / "_delta_log").glob(".*.crc"):
            crc.unlink()
    return path


def test_databricks_shredded_variants_are_stitched_byte_for_byte(con, dcon, spark, tmp_path):  # noqa: F811
    path = shredded_table(tmp_path)
    # Spark 4.0.1's parquet-java does not know the VARIANT logical type of Databricks' footers
    # (a NullPointerException in ParquetMetadataConverter.getLogicalTypeAnnotation): the table
    # is unreadable to it before any maintenance, so DuckDB's delta extension is the reader here.
    with pytest.raises(Exception, match="FAILED_READ_FILE"):
        spark.sql(f"SELECT to_json(v) FROM delta.`{path}`").collect()
    query = f"SELECT s.i, v::VARCHAR, variant_extract(v, 'key')::BIGINT FROM delta_scan('{path}')"
    before = sorted(dcon.execute(query).fetchall())
    assert len(before) == 10 and all(r[2] == r[0] for r in before), before
    files_before = live_files(path)
    raw_before = raw_variants(files_before, "s.i", "v")
    assert any("typed_value" in leaf for leaf in next(iter(raw_before.values()))), "shredded"
    [schema] = {schema_of(f) for f in files_before}
    assert "Variant(1)" in schema
    version = d.current_version(path)

    rows = compact(con, path, small_file_threshold_mb=1)
    [r] = rows.values()
    assert (r["verdict"], r["method"], r["input_files"], r["output_files"]) == ("compacted", "stitch", 2, 1), r

    assert sorted(dcon.execute(query).fetchall()) == before
    files_after = live_files(path)
    assert len(files_after) == 1 and schema_of(files_after[0]) == schema
    assert raw_variants(files_after, "s.i", "v") == raw_before
    # The writer's variant min/max (z85 variants) are not carried: the new file has none.
    [add] = adds(path, version + 1)
    stats = json.loads(add["stats"])
    assert "v" not in stats["minValues"] and "v" not in stats["maxValues"], stats


def test_shredded_files_are_not_copied_where_shredding_is_not_enabled(con, tmp_path):
    path = shredded_table(tmp_path, enabled=False)
    listing = d.listing(path)
    rows = compact(con, path, small_file_threshold_mb=1)
    [r] = rows.values()
    assert r["verdict"] == "skipped", r
    assert "holds a shredded variant ('v.typed_value.key.value')" in r["reason"], r
    assert "does not enable variant shredding" in r["reason"], r
    assert d.listing(path) == listing
