"""Delta's collated strings (delta-io/delta `protocol_rfcs/collated-string-type.md`, writer feature
`collations` / `collations-preview`, requiring `domainMetadata`; issue 51 item 4).

A collation lives in the schema (`__COLLATIONS` in the metadata of the nearest ancestor field, a
map from path to collation id: `name`, `tags.element`, `x` of a struct). Plain
`minValues`/`maxValues` of a collated column are UTF-8 binary bounds and stay allowed;
collation-aware bounds sit in `stats.statsWithCollation.<versioned id>` and are valid only for
that exact collation version. A compaction keeps the schema as it is, writes binary bounds and
never copies `statsWithCollation`.

OSS Delta (4.0 … 4.4) cannot create such a table; only Databricks does. The table here is written
by Spark 4.0.1 + Delta 4.0.0, then three honest commits make it one: the protocol gains
`domainMetadata` and `collations` (with the `appendOnly`/`invariants` its writer version 2
implied), the metadata gains `__COLLATIONS` (`spark.UTF8_LCASE`, `icu.UNICODE`), and one file is
re-added with `dataChange: false` and stats that carry `statsWithCollation` (what a stats
recomputation commits). Spark 4.0 / Delta 4.0 reads the result (the feature is writer-only), as do
deltalake and DuckDB's delta extension; the rows are compared across all three before and after.
The Delta golden tables `collations-table` and `collations-preview-table` (Databricks, no data)
are in test_delta_golden.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq

import delta_tables as d
from test_delta import call, compact, dcon  # noqa: F401 (dcon: a fixture)
from test_delta_golden import duckdb_json, spark_json

COLLATED = {
    "name": {"name": "spark.UTF8_LCASE"},
    "tags": {"tags.element": "icu.UNICODE"},
}
STRUCT_FIELD = {"x": "spark.UTF8_LCASE"}
# Values whose UTF-8 binary order differs from a case-insensitive one: 'B' < 'a' < 'é' in bytes.
NAMES = ["a", "B", "é", "Zed", "apple"]


def spark_collated_table(spark, path: Path) -> None:
    t = f"delta.`{path}`"
    d.spark_sql(spark, f"CREATE TABLE {t} (id bigint, name string, tags array<string>, s struct<x: string>) USING delta")
    names = "array(" + ", ".join(f"'{n}'" for n in NAMES) + ")"
    for k in range(3):
        d.spark_sql(spark, f"INSERT INTO {t} SELECT /*+ REPARTITION(2) */ id, element_at({names}, CAST(id % 5 + 1 AS INT)), "
                           "array(upper(concat('t', id)), concat('t', id)), named_struct('x', concat('X', id)) "
                           f"FROM range({k * 10}, {k * 10 + 10})")
    version = d.current_version(path)
    log = path / "_delta_log"
    # 1. The protocol: writer 7 with the features writer 2 implied, plus collations.
    protocol = {"minReaderVersion": 1, "minWriterVersion": 7,
                "writerFeatures": ["appendOnly", "invariants", "domainMetadata", "collations"]}
    commit(log, version + 1, "SET TBLPROPERTIES", [{"protocol": protocol}])
    # 2. The schema: collations on name, tags' elements and s.x, as Databricks writes them.
    (metadata,) = [a for v in range(version + 1) for a in d.commit_actions(path, v) if "metaData" in a]
    schema = json.loads(metadata["metaData"]["schemaString"])
    for field in schema["fields"]:
        if field["name"] in COLLATED:
            field["metadata"]["__COLLATIONS"] = COLLATED[field["name"]]
        if field["name"] == "s":
            (x,) = field["type"]["fields"]
            x["metadata"]["__COLLATIONS"] = STRUCT_FIELD
    metadata["metaData"]["schemaString"] = json.dumps(schema)
    commit(log, version + 2, "ALTER COLUMN", [metadata])
    # 3. One file's stats recomputed with collation-aware bounds.
    add = next(a["add"] for a in d.commit_actions(path, 1) if "add" in a)
    stats = json.loads(add["stats"])
    stats["statsWithCollation"] = {"spark.UTF8_LCASE.75": {"minValues": {"name": "a"}, "maxValues": {"name": "zed"}}}
    readd = dict(add, dataChange=False, stats=json.dumps(stats))
    commit(log, version + 3, "COMPUTE STATS", [{"add": readd}])


def commit(log: Path, version: int, operation: str, actions: list[dict]) -> None:
    lines = [{"commitInfo": {"timestamp": 1, "operation": operation}}] + actions
    (log / f"{version:020}.json").write_text("".join(json.dumps(a) + "\n" for a in lines))


def test_a_collated_table_is_compacted_with_binary_bounds_only(con, dcon, spark, tmp_path):
    path = tmp_path / "collated"
    spark_collated_table(spark, path)
    version = d.current_version(path)
    [health] = call(con, "lakehouse_metadata_health", path)
    assert (health["compaction_blocked_by"], health["cleanup_blocked_by"]) == (None, None), health
    before_spark, before_duck, before_dl = spark_json(spark, path), duckdb_json(dcon, path), d.rows_deltalake(path)
    assert len(before_spark) == 30 and d.rows_duckdb(dcon, path) == before_dl, "the readers agree before"

    rows = compact(con, path, small_file_threshold_mb=1, target_file_size_mb=1)
    assert [r["verdict"] for r in rows.values()] == ["compacted"], rows
    actions = d.commit_actions(path, version + 1)
    assert not any("metaData" in a or "protocol" in a for a in actions), "schema (with __COLLATIONS) untouched"
    (add,) = [a["add"] for a in actions if "add" in a]
    removed = [a["remove"] for a in actions if "remove" in a]
    assert len(removed) == 6, removed
    stats = json.loads(add["stats"])
    assert "statsWithCollation" not in stats, stats
    # Binary (UTF-8 byte) order: 'B' < 'Zed' < 'a' < 'apple' < 'é'.
    assert (stats["minValues"]["name"], stats["maxValues"]["name"]) == ("B", "é"), stats
    assert pq.read_metadata(path / add["path"]).num_rows == 30

    assert spark_json(spark, path) == before_spark
    assert spark_json(spark, path, version) == before_spark, "time travel"
    assert duckdb_json(dcon, path) == before_duck
    assert d.rows_deltalake(path) == before_dl
    # VACUUM knows the feature (it names no file of its own).
    call(con, "lakehouse_vacuum", path)
