"""Tables written by other engines: Spark (v1, v2, v3 with deletion vectors), Flink, Hive, Impala,
the Java API and Trino (v3, ``variant``) — the 17 tables of ``../shared/fixtures/iceberg-foreign``.

Each test works on a fresh copy made by the fixtures' own ``relocate.py``. What the tables hold is
known independently of us: ``fixtures.json`` (counts recorded when the fixtures were collected),
Apache Spark, DuckDB's iceberg extension and pyiceberg (rows; Spark reads all 17 tables by their
metadata file), and fastavro (the spec's definition of a referenced file, for orphans). Where a reader cannot read a table (DuckDB: Iceberg 0.9's v1
``schema`` field; pyiceberg: equality deletes, ``variant``), it is left out for that table only,
by a list kept here, so that a reader silently failing everywhere would fail the test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import fastavro
import pytest
from pyiceberg.table import StaticTable

from conftest import fixtures_dir

FIXTURES = fixtures_dir() / "iceberg-foreign"
INFO: dict = json.loads((FIXTURES / "fixtures.json").read_text()) if FIXTURES.is_dir() else {}
NAMES = sorted(INFO)

# Readers that cannot read a table as committed (checked on the pristine copies).
DUCKDB_CANNOT = {
    # Iceberg 0.9's top-level v1 `schema`: "Reading of the V1 'schema' field is not currently supported"
    "spark-v1-partitioned-20-small-files",
    "spark-v1-unpartitioned-20-small-files",
}
PYICEBERG_CANNOT = {name for name, info in INFO.items() if info["current_live_equality_delete_files"]} | {
    "trino-v3-variant",  # pyiceberg 0.12 rejects the variant type
}
# The one table whose history is incomplete (an old snapshot's manifest list is missing).
MISSING_HISTORY = "spark-java-v2-equality-deletes"


@pytest.fixture(scope="module", autouse=True)
def _fixtures_present():
    if not FIXTURES.is_dir():
        pytest.fail(f"the shared fixtures are not at {FIXTURES}: set LAKEHOUSE_FIXTURES")


def relocated(name: str, where: Path) -> Path:
    """A fresh copy of fixture ``name`` under ``where``; returns its current metadata file."""
    root = where / name
    subprocess.run(
        [sys.executable, str(FIXTURES / "relocate.py"), str(FIXTURES / name), str(root)],
        check=True,
        capture_output=True,
    )
    return root / INFO[name]["metadata"]


def table_root(metadata: Path) -> Path:
    return metadata.parent.parent


def readers_for(name: str) -> list[str]:
    readers = [r for r, cannot in (("duckdb", DUCKDB_CANNOT), ("pyiceberg", PYICEBERG_CANNOT)) if name not in cannot]
    return ["spark", *readers]


def read_rows(reader: str, iceberg_con, metadata: str, spark=None) -> list:
    if reader == "spark":
        # Every row as JSON (binary and nested values included), compared as a multiset. Spark
        # 4.0 cannot print Trino's variant values (UNKNOWN_PRIMITIVE_TYPE_IN_VARIANT, type 17):
        # variant columns are left out of Spark's rows (DuckDB compares them).
        from pyspark.sql.types import VariantType

        frame = spark.read.format("iceberg").load(metadata)
        frame = frame.drop(*[f.name for f in frame.schema.fields if isinstance(f.dataType, VariantType)])
        return sorted(r[0] for r in frame.selectExpr("to_json(struct(*))").collect())
    if reader == "duckdb":
        rows = iceberg_con.execute(f"SELECT * FROM iceberg_scan('{metadata}')").fetchall()
    else:
        rows = [tuple(r.values()) for r in StaticTable.from_metadata(metadata).scan().to_arrow().to_pylist()]
    return sorted(rows, key=repr)


def as_dicts(cursor) -> list[dict]:
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row)) for row in cursor.fetchall()]


@pytest.mark.parametrize("name", NAMES)
def test_profile_counts_every_file_and_delete_file(con, iceberg_con, tmp_path, name):
    info = INFO[name]
    metadata = relocated(name, tmp_path)
    profile = as_dicts(con.execute(f"SELECT * FROM lakehouse_fragmentation('{metadata}')"))
    assert sum(p["total_files"] for p in profile) == info["current_live_data_files"]
    assert sorted(p["total_files"] for p in profile) == sorted(info["files_per_partition"])
    assert len(profile) == info["current_partitions"]
    assert sum(p["record_count"] for p in profile) == info["summary_total_records"]
    health = as_dicts(con.execute(f"SELECT * FROM lakehouse_metadata_health('{metadata}')"))[0]
    assert health["data_files"] == info["current_live_data_files"]
    assert health["position_delete_files"] == info["current_live_position_delete_files"]
    assert health["equality_delete_files"] == info["current_live_equality_delete_files"]
    assert health["snapshots"] == info["snapshots"]
    # Every live delete file is counted in its partition, dangling ones too (none of these tables
    # has a global delete applying across partitions): the profile's column says what Spark's
    # `partitions` table, DuckDB's `iceberg_metadata` and the health figures say.
    assert sum(p["delete_files"] for p in profile) == health["position_delete_files"] + health["equality_delete_files"]
    if name == "flink-v2-partitioned-equality-deletes":
        # 4 live equality deletes, 2 per partition; per partition one is older than every data
        # file left (Flink's upsert rewrote them), so it deletes nothing: dangling.
        assert sorted((p["delete_files"], p["dangling_delete_files"]) for p in profile) == [(2, 1), (2, 1)], profile
    # A second opinion on the counts where DuckDB's iceberg extension reads the table (for
    # deletion vectors it lists the Puffin file once per vector, as the manifests do).
    if name not in DUCKDB_CANNOT:
        listed = iceberg_con.execute(
            f"SELECT content, count(*) FROM iceberg_metadata('{metadata}') WHERE status != 'DELETED' GROUP BY content"
        ).fetchall()
        counts = {content: n for content, n in listed}
        assert counts.get("EXISTING", 0) + counts.get("DATA", 0) == info["current_live_data_files"], counts
        deletes = sum(n for content, n in counts.items() if content not in ("EXISTING", "DATA"))
        assert deletes == health["position_delete_files"] + health["equality_delete_files"], counts


@pytest.mark.parametrize("name", NAMES)
def test_health_and_expiry_plan_read_the_whole_history(con, tmp_path, name):
    metadata = relocated(name, tmp_path)
    health = as_dicts(con.execute(f"SELECT * FROM lakehouse_metadata_health('{metadata}', snapshot_retention_days := 0)"))[0]
    plan = as_dicts(con.execute(f"SELECT * FROM lakehouse_expire_snapshots('{metadata}', snapshot_retention_days := 0, dry_run := true)"))
    expired = [r for r in plan if r["kind"] == "snapshot"]
    assert len(expired) == health["expirable_snapshots"]
    assert all(r["action"] in ("would expire", "would delete", "already gone") for r in plan), plan
    if name == MISSING_HISTORY:
        # Reported, not fatal: the figures that need the lost list are left out, with the reason.
        assert health["missing_metadata_files"] == 1
        assert health["orphan_files"] is None
        assert "missing" in health["reason"]
        lost = [r for r in plan if r["kind"] == "manifest_list" and r["action"] == "already gone"]
        assert len(lost) == 1 and "34f7dec7" in lost[0]["path"]
    else:
        assert health["missing_metadata_files"] == 0
    assert len(expired) == INFO[name]["snapshots"] - 1 or name == "spark-v1-day-partitioned"


def referenced_by_spec(metadata: Path) -> set[str]:
    """Every file the table's metadata references, read with fastavro (not with our code): the
    current metadata file and its log, statistics files, every snapshot's manifest list, every
    manifest they name and every file any entry names."""
    current = json.loads(metadata.read_text())
    names = {str(metadata)}
    names |= {m["metadata-file"] for m in current.get("metadata-log", [])}
    names |= {s["statistics-path"] for s in current.get("statistics", [])}
    names |= {s["statistics-path"] for s in current.get("partition-statistics", [])}
    for snapshot in current.get("snapshots", []):
        names.add(snapshot["manifest-list"])
        with open(snapshot["manifest-list"], "rb") as f:
            for entry in fastavro.reader(f):
                names.add(entry["manifest_path"])
                with open(entry["manifest_path"], "rb") as m:
                    names |= {e["data_file"]["file_path"] for e in fastavro.reader(m)}
    return {os.path.normpath(n.removeprefix("file:")) for n in names}


@pytest.mark.parametrize("name", [n for n in NAMES if n != MISSING_HISTORY])
def test_orphans_are_exactly_the_unreferenced_visible_files(con, tmp_path, name):
    metadata = relocated(name, tmp_path)
    root = table_root(metadata)
    old = time.time() - 10 * 86_400
    on_disk = set()
    for directory, subdirs, files in os.walk(root):
        # Java's listing (FileSystemWalker) skips hidden names at any depth: .crc checksums etc.
        subdirs[:] = [d for d in subdirs if not d.startswith((".", "_"))]
        for f in files:
            os.utime(os.path.join(directory, f), (old, old))
            if not f.startswith((".", "_")):
                on_disk.add(os.path.normpath(os.path.join(directory, f)))
    expected = on_disk - referenced_by_spec(metadata) - {str(root / "metadata" / "version-hint.text")}
    listed = {r[0] for r in con.execute(f"SELECT path FROM lakehouse_remove_orphan_files('{metadata}')").fetchall()}
    assert listed == expected
    # The special cases the fixtures' README names.
    if name == "impala-v2-equality-deletes-schema-evolution":
        assert any(p.endswith(".avro_tmp") for p in listed)
    if name == "trino-v3-variant":
        assert not any(p.endswith(".stats") for p in listed), "the statistics file is referenced"
    assert not any(Path(p).name.endswith(".crc") for p in listed)


@pytest.mark.parametrize("name", NAMES)
def test_compaction_and_expiry_keep_every_row(con, iceberg_con, spark, tmp_path, name):
    info = INFO[name]
    metadata = relocated(name, tmp_path)
    root = table_root(metadata)
    readers = readers_for(name)
    assert len(readers) >= 2, "Spark and at least one more independent reader"
    before = {r: read_rows(r, iceberg_con, str(metadata), spark) for r in readers}
    assert all(len(rows) == info["rows_after_deletes_relocated"] for rows in before.values()), name
    outside = sorted(p for p in root.parent.rglob("*") if p.is_file() and root not in p.parents)

    # Every partition counts as degraded (all files are small, ratio threshold 0).
    force = "small_file_threshold_mb := 1, fragmentation_ratio_threshold := 0"
    if name == "trino-v3-variant":
        with pytest.raises(Exception, match=r"lakehouse_compact: compaction cannot rewrite columns of type .*\(variant\)"):
            con.execute(f"SELECT * FROM lakehouse_compact('{metadata}', {force})").fetchall()
    else:
        deletes = {p: n - dangling for p, n, dangling in con.execute(
            f"SELECT partition, delete_files, dangling_delete_files FROM lakehouse_fragmentation('{metadata}')").fetchall()}
        plans = as_dicts(con.execute(f"SELECT * FROM lakehouse_compact('{metadata}', {force})"))
        compacted = [p for p in plans if p["verdict"] == "compacted"]
        # Every partition of two or more files is compacted into one file, the deletes that
        # apply to it applied (merge-on-read); the rows every reader sees are checked below.
        assert all(p["delete_files"] == deletes[p["partition"]] for p in plans), plans
        want = [p["files_before"] for p in plans if p["files_before"] >= 2]
        assert sorted(p["files_before"] for p in compacted) == sorted(want), plans
        assert all(p["files_after"] == 1 for p in compacted), plans
        assert all(p["reason"].endswith(f", applying {p['delete_files']} delete files") for p in compacted if p["delete_files"]), plans
    expiry = as_dicts(con.execute(f"SELECT * FROM lakehouse_expire_snapshots('{metadata.parent}/{newest(metadata)}', snapshot_retention_days := 0)"))
    assert not any(r["action"].startswith("delete failed") for r in expiry), expiry
    latest = metadata.parent / newest(metadata)
    for reader in readers:
        assert read_rows(reader, iceberg_con, str(latest), spark) == before[reader], reader
    # Nothing outside the table location was deleted (java-v1-…: data folders beside the root);
    # new files outside it are only where the table says data goes (`write.data.path`).
    after = sorted(p for p in root.parent.rglob("*") if p.is_file() and root not in p.parents)
    assert set(outside) <= set(after)
    data_path = json.loads(latest.read_text()).get("properties", {}).get("write.data.path")
    assert all(data_path and str(p).startswith(data_path + "/") for p in set(after) - set(outside))


@pytest.mark.parametrize("name", NAMES)
def test_manifest_rewrite_keeps_every_row_and_entry(con, iceberg_con, spark, tmp_path, name):
    """The manifest merge on every foreign writer's manifests (Flink, Hive, Impala, Java, Spark,
    Trino; v1, v2 and v3; data and delete manifests): the rows every reader sees and the live
    entries pyiceberg lists (path, content, sequence numbers, records) stay as they were. Test
    builds cross-check each merged manifest against iceberg-rust's decoder and writer."""
    metadata = relocated(name, tmp_path)
    readers = readers_for(name)
    before = {r: read_rows(r, iceberg_con, str(metadata), spark) for r in readers}

    def entries(path: Path) -> list[tuple]:
        table = StaticTable.from_metadata(str(path))
        out = []
        for manifest in table.current_snapshot().manifests(table.io):
            for e in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
                f = e.data_file
                out.append((f.file_path, int(f.content), e.sequence_number, e.file_sequence_number, f.record_count))
        return sorted(out)

    entries_before = entries(metadata) if name not in PYICEBERG_CANNOT else None
    groups = as_dicts(con.execute(f"SELECT * FROM lakehouse_rewrite_manifests('{metadata}', target_manifest_size_mb := 8)"))
    assert groups and all(g["action"] in ("merged", "kept") for g in groups), groups
    latest = metadata.parent / newest(metadata)
    if any(g["action"] == "merged" for g in groups):
        assert latest != metadata, "a merge commits a new metadata file"
    for reader in readers:
        assert read_rows(reader, iceberg_con, str(latest), spark) == before[reader], reader
    if entries_before is not None:
        assert entries(latest) == entries_before


@pytest.mark.parametrize("name", [n for n in NAMES if n != "trino-v3-variant"])
def test_zorder_compaction_keeps_every_row(con, iceberg_con, spark, tmp_path, name):
    """A z-order on the first two top-level primitive columns of each foreign table (Flink,
    Hive, Impala, Trino, Java writers: their types, deletes and layouts): the rows every reader
    sees are the same after the rewrite."""
    metadata = relocated(name, tmp_path)
    readers = readers_for(name)
    before = {r: read_rows(r, iceberg_con, str(metadata), spark) for r in readers}
    schema = StaticTable.from_metadata(str(metadata)).schema()
    columns = [f.name for f in schema.fields if f.field_type.is_primitive and "`" not in f.name][:2]
    assert columns, name
    zorder = "zorder(" + ", ".join(f"`{c}`" for c in columns) + ")"
    plans = as_dicts(con.execute(
        f"SELECT * FROM lakehouse_compact('{metadata}', small_file_threshold_mb := 1, fragmentation_ratio_threshold := 0, "
        f"sort_order := '{zorder}')"
    ))
    compacted = [p for p in plans if p["verdict"] == "compacted"]
    # Every partition of two or more files is rewritten, in z-order (tables of single-file
    # partitions keep theirs: nothing to rewrite).
    want = [p["files_before"] for p in plans if p["files_before"] >= 2]
    assert sorted(p["files_before"] for p in compacted) == sorted(want), plans
    assert all(p["strategy"] == "zorder(" + ", ".join(columns) + ")" for p in compacted), plans
    latest = metadata.parent / newest(metadata)
    for reader in readers:
        assert read_rows(reader, iceberg_con, str(latest), spark) == before[reader], reader


def newest(metadata: Path) -> str:
    """The newest vN.metadata.json beside ``metadata`` (our commits add v{N+1})."""
    versions = [p.name for p in metadata.parent.glob("v*.metadata.json")]
    return max(versions, key=lambda n: int(n[1:].split(".")[0]))


def test_the_gate_compacts_a_v3_table_keeping_row_lineage(con, iceberg_con, spark, spark_warehouse):
    """The gate on a format v3 table (Spark 4 writes row lineage in four small appends, no
    deletes): compacted and expired, rows unchanged through Spark and DuckDB, every row's
    `_row_id` and `_last_updated_sequence_number` unchanged (Spark's metadata columns), and the
    table's `next-row-id` advanced by the rows the new manifest was assigned, as the spec says."""
    ident = "hc.ns.gate_v3"
    spark.sql("CREATE NAMESPACE IF NOT EXISTS hc.ns")
    spark.sql(f"CREATE TABLE {ident} (id bigint, s string) USING iceberg TBLPROPERTIES ('format-version'='3')")
    for i in range(4):
        spark.sql(f"INSERT INTO {ident} SELECT id, concat('s', id) FROM range({i * 10}, {i * 10 + 10})")
    table = spark_warehouse / "ns" / "gate_v3"
    metadata = table / "metadata" / newest(table / "metadata" / "v1.metadata.json")
    assert json.loads(metadata.read_text())["format-version"] == 3
    before = {r: read_rows(r, iceberg_con, str(metadata), spark) for r in ("spark", "duckdb")}
    lineage = "SELECT id, _row_id, _last_updated_sequence_number FROM " + ident + " ORDER BY id"
    lineage_before = spark.sql(lineage).collect()
    files = spark.sql(f"SELECT count(*) FROM {ident}.files").collect()[0][0]
    assert files >= 4
    rows = as_dicts(con.execute(
        f"SELECT * FROM lakehouse_gate('{table}', small_file_threshold_mb := 1, snapshot_retention_days := 0)"
    ))
    assert [(r["verdict"], r["files_before"], r["files_after"]) for r in rows] == [("compacted", files, 1)], rows
    assert rows[0]["status"] == "maintained", rows
    latest = table / "metadata" / newest(metadata)
    for reader, want in before.items():
        assert read_rows(reader, iceberg_con, str(latest), spark) == want, reader
    assert spark.sql(lineage).collect() == lineage_before
    written = json.loads(latest.read_text())
    assert written["next-row-id"] == 40 + 40, "the rewritten rows' new manifest was assigned 40 ids"
    assert all("first-row-id" in snap for snap in written["snapshots"])
