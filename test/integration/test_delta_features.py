"""Delta tables Spark 4.0.1 + Delta 4.0.0 writes with one newer feature each (delta_tables.
FEATURE_TABLES), fragmented by small INSERTs: in-commit timestamps, type widening (top-level, and of a
struct field, a list's element and a map's key and value, also under column mapping), timestamp_ntz,
v2 checkpoints and liquid clustering are compacted — Spark reads the same rows (also as of before), its history
shows our OPTIMIZE, and it keeps writing; variant too, its files stitched (test_variant.py).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import delta_tables as d
from test_delta import compact, error_of

SMALL_MB = 1.0
REFUSED: dict[str, str] = {}


@pytest.fixture(scope="module")
def feature_tables(spark, tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("delta-features")
    for name in d.FEATURE_TABLES:
        d.build_spark_feature_table(spark, root / name, name)
    return {name: root / name for name in d.FEATURE_TABLES}


def spark_json(spark, path: Path, version: int | None = None) -> list[str]:
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", int(version))
    return sorted(reader.load(str(path)).toJSON().collect())


def physical_names(path: Path) -> dict[str, str]:
    """Column mapping: each top-level column's physical name, and each struct field's (``s.a``)."""
    import json

    meta = [a["metaData"] for v in range(d.current_version(path) + 1) for a in d.commit_actions(path, v)
            if "metaData" in a][-1]
    out = {}
    for f in json.loads(meta["schemaString"])["fields"]:
        out[f["name"]] = f["metadata"]["delta.columnMapping.physicalName"]
        for child in f["type"].get("fields", []) if isinstance(f["type"], dict) else []:
            out[f"{f['name']}.{child['name']}"] = child["metadata"]["delta.columnMapping.physicalName"]
    return out


@pytest.mark.parametrize("name", sorted(d.FEATURE_TABLES))
def test_compaction_of_spark_feature_tables(con, spark, feature_tables, tmp_path, name):
    path = d.twin(feature_tables[name], tmp_path / name)
    if name in REFUSED:
        listing = d.listing(path)
        message = error_of(con, f"SELECT * FROM lakehouse_compact('{path}', small_file_threshold_mb := {SMALL_MB})")
        assert "lakehouse_compact" in message and REFUSED[name] in message, message
        assert d.listing(path) == listing
        return
    before = spark_json(spark, path)
    version = d.current_version(path)
    rows = compact(con, path, small_file_threshold_mb=SMALL_MB, target_file_size_mb=SMALL_MB)
    assert {r["verdict"] for r in rows.values()} == {"compacted"}, rows
    assert d.current_version(path) == version + 1
    assert spark_json(spark, path) == before
    assert spark_json(spark, path, version=version) == before, "time travel"
    history = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()
    assert history[0]["operation"] == "OPTIMIZE" and history[0]["version"] == version + 1
    if name == "ict":
        infos = [next(a["commitInfo"] for a in d.commit_actions(path, v) if "commitInfo" in a) for v in (version, version + 1)]
        assert "inCommitTimestamp" in d.commit_actions(path, version + 1)[0]["commitInfo"], "commitInfo first, with its timestamp"
        assert infos[1]["inCommitTimestamp"] > infos[0]["inCommitTimestamp"]
        stamps = [h["timestamp"] for h in sorted(history, key=lambda h: h["version"])]
        assert stamps == sorted(stamps), "Spark's history (in-commit timestamps) increases"
    if name == "widened":
        import pyarrow.parquet as pq

        adds = [a["add"]["path"] for a in d.commit_actions(path, version + 1) if "add" in a]
        assert adds and all(str(pq.read_schema(d._abs(path, rel)).field("n").type) == "int64" for rel in adds), \
            "files written before the widening are rewritten with the widened type"
    if name == "variant":
        assert all(r["method"] == "stitch" for r in rows.values()), rows
    if name.startswith("nested_widened"):
        import pyarrow.parquet as pq

        adds = [a["add"]["path"] for a in d.commit_actions(path, version + 1) if "add" in a]
        physical = physical_names(path) if name.endswith("mapped") else {}
        s, l, m = (physical.get(n, n) for n in ("s", "l", "m"))
        for rel in adds:
            schema = pq.read_schema(d._abs(path, rel))
            a = schema.field(s).type.field(physical.get("s.a", "a"))
            assert str(a.type) == "int64", schema
            assert str(schema.field(l).type.value_type) == "int64", schema
            assert (str(schema.field(m).type.key_type), str(schema.field(m).type.item_type)) == ("int64", "int64"), schema
        assert adds, "files written before the widening of s.a, l.element, m.key and m.value are rewritten wide"
        assert not any("metaData" in a for a in d.commit_actions(path, version + 1)), "schema and typeChanges kept"
    if name == "clustered":
        adds = [a["add"] for a in d.commit_actions(path, version + 1) if "add" in a]
        assert adds and all(a.get("clusteringProvider") == "liquid" for a in adds), adds
        assert all(r["strategy"] == "zorder(id, v)" for r in rows.values()), rows
    if name == "icebergcompat":
        added = [a["add"] for a in d.commit_actions(path, version + 1) if "add" in a]
        removed = [a["remove"]["path"] for a in d.commit_actions(path, version + 1) if "remove" in a]
        assert added and all(json.loads(a["stats"])["numRecords"] > 0 for a in added), added
        assert {parquet_field_ids(d._abs(path, a["path"])) for a in added} == {parquet_field_ids(d._abs(path, removed[0]))}, \
            "the rewritten files carry the field ids Spark wrote: columns, struct fields, elements, keys, values"
    d.spark_sql(spark, f"INSERT INTO delta.`{path}` SELECT * FROM delta.`{path}` LIMIT 3")
    assert len(spark_json(spark, path)) == len(before) + 3


def parquet_field_ids(path: str) -> tuple[tuple[str, int], ...]:
    """Every named node of a Parquet file's schema below its root with its field id, in schema
    order (the repeated groups of lists and maps, which carry none, left out)."""
    import pyarrow.parquet as pq

    nodes = re.findall(r"^\s*(?:optional|required) \S+ field_id=(-?\d+) (\S+)", str(pq.ParquetFile(path).schema), re.M)
    return tuple((name.rstrip(";"), int(field_id)) for field_id, name in nodes[1:])


def test_v2_checkpoints_are_left_to_spark(con, spark, feature_tables, tmp_path):
    """Our commit on a v2-checkpoint table writes no checkpoint (delta-rs would write a classic
    one); Spark's next commits checkpoint it as its policy says and read it back."""
    path = d.twin(feature_tables["v2cp"], tmp_path / "v2cp")
    before_log = {p.name for p in (path / "_delta_log").iterdir()}
    assert any(".checkpoint." in n and n.count(".") >= 3 for n in before_log), sorted(before_log)
    compact(con, path, small_file_threshold_mb=SMALL_MB, target_file_size_mb=SMALL_MB)
    added = {p.name for p in (path / "_delta_log").iterdir()} - before_log
    assert not any("checkpoint" in n for n in added), added
    for k in range(4):
        d.spark_sql(spark, f"INSERT INTO delta.`{path}` SELECT id, 'after' FROM range({1000 + k}, {1001 + k})")
    assert len(spark_json(spark, path)) == 80 + 4


def test_a_clustered_table_takes_no_layout_of_the_users(con, feature_tables, tmp_path):
    path = d.twin(feature_tables["clustered"], tmp_path / "clustered")
    listing = d.listing(path)
    message = error_of(con, f"SELECT * FROM lakehouse_compact('{path}', small_file_threshold_mb := {SMALL_MB}, sort_order := 'v')")
    assert "lakehouse_compact" in message and "clustered" in message and "sort_order" in message, message
    assert d.listing(path) == listing
