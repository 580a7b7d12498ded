"""Delta VACUUM never deletes a file a reader still needs: UniForm's Iceberg metadata, live files
named under another spelling of the table's directory, anything of a feature it does not know.

- UniForm tables (`icebergCompatV1/V2`, `delta.universalFormat.enabledFormats = iceberg`) keep
  Iceberg metadata in `<root>/metadata/`: Spark's VACUUM leaves every directory named `metadata`
  alone there, and so do we (also when only the feature is listed: safer than Spark, which then
  deletes it). Compaction refuses such a table, naming UniForm: it cannot keep that metadata in
  step. The table is Delta's own golden table `table-with-icebegCompatV2Enabled` (written by
  Spark; test/data/SOURCES.md), with Iceberg metadata pyiceberg writes beside it.
- A log naming its files by absolute `file:` paths, the table named through a symlink or with
  `..`: real paths on both sides keep every live file; an absolute path outside the table is
  refused ("prefix mismatch").
- A writer feature this vacuum does not know is refused by name (Delta's `vacuumProtocolCheck`).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
from deltalake import write_deltalake
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField

import conftest as c
import delta_tables as d

GOLDEN = c.REPO_ROOT / "test" / "data" / "delta_iceberg_compat_v2"
RETENTION_H = 168


def vacuum_paths(con, table, **params) -> set[str]:
    args = "".join(f", {k} := {v!r}" if not isinstance(v, bool) else f", {k} := {str(v).lower()}" for k, v in params.items())
    return {r[0] for r in con.execute(f"SELECT path FROM lakehouse_vacuum('{table}'{args})").fetchall()}


def uniform_table(tmp_path: Path, enabled_formats: bool) -> Path:
    """A copy of the golden icebergCompatV2 table, with `delta.universalFormat.enabledFormats =
    iceberg` in its metadata when `enabled_formats` (as a UniForm table has it), and Iceberg
    metadata files written by pyiceberg for the same location in `metadata/`, everything aged
    30 days."""
    root = tmp_path / "uniform"
    shutil.copytree(GOLDEN, root)
    if enabled_formats:
        log = root / "_delta_log" / f"{0:020}.json"
        lines = []
        for line in log.read_text().splitlines():
            action = json.loads(line)
            if "metaData" in action:
                action["metaData"]["configuration"]["delta.universalFormat.enabledFormats"] = "iceberg"
            lines.append(json.dumps(action))
        log.write_text("\n".join(lines) + "\n")
        (root / "_delta_log" / f".{0:020}.json.crc").unlink()
    catalog = SqlCatalog("uniform", uri=f"sqlite:///{tmp_path}/uniform.db", warehouse=f"file://{tmp_path}/wh")
    catalog.create_namespace("ns")
    table = catalog.create_table("ns.t", schema=Schema(NestedField(1, "ByteType", LongType(), required=False)),
                                 location=f"file://{root}")
    for k in range(3):
        with table.transaction() as tx:
            tx.set_properties({"commit": str(k)})
        table = catalog.load_table("ns.t")
    assert len(list((root / "metadata").glob("*.metadata.json"))) == 4
    d.age_files(root)
    return root


@pytest.mark.parametrize("enabled_formats", [True, False], ids=["uniform", "feature-only"])
def test_vacuum_leaves_uniforms_iceberg_metadata_alone(con, spark, tmp_path, enabled_formats):
    root = uniform_table(tmp_path, enabled_formats)
    metadata = {str(p) for p in (root / "metadata").iterdir()}
    ours = vacuum_paths(con, root, retention_hours=RETENTION_H)
    assert not ours & metadata, "UniForm's Iceberg metadata listed for deletion"
    assert ours == set(), ours  # the golden table has nothing else to vacuum
    if enabled_formats:
        # Spark skips `metadata` on a UniForm table too: the same (empty) list.
        assert d.vacuum_spark(spark, root, RETENTION_H) == ours
    deleted = con.execute(f"SELECT count(*) FROM lakehouse_vacuum('{root}', dry_run := false)").fetchone()[0]
    assert deleted == 0 and {str(p) for p in (root / "metadata").iterdir()} == metadata


def test_compaction_refuses_a_uniform_table_naming_uniform(con, tmp_path):
    root = uniform_table(tmp_path, True)
    with pytest.raises(duckdb.Error, match="converts every commit to Iceberg metadata \\(UniForm"):
        con.execute(f"SELECT * FROM lakehouse_compact('{root}', small_file_threshold_mb := 1)").fetchall()
    assert {p.name for p in (root / "_delta_log").iterdir()} == {f"{0:020}.json"}


def test_compaction_rewrites_an_iceberg_compat_table_that_converts_nothing(con, spark, tmp_path):
    """`icebergCompatV2` alone (no `enabledFormats`: nothing converts the log to Iceberg) is
    rewritten as the feature asks: Spark reads the same rows, every type of the golden table
    (nested arrays, maps and structs with element, key and value ids) included."""
    root = tmp_path / "compat"
    shutil.copytree(GOLDEN, root)
    def spark_json():  # as JSON: pyspark cannot collect its maps keyed by arrays
        return sorted(spark.read.format("delta").load(str(root)).toJSON().collect())

    before = spark_json()
    assert len(before) == 6
    rows = con.execute(f"SELECT verdict FROM lakehouse_compact('{root}', small_file_threshold_mb := 1)").fetchall()
    assert rows == [("compacted",)], rows
    assert d.current_version(root) == 1
    assert spark_json() == before


def test_vacuum_refuses_a_writer_feature_it_does_not_know(con, tmp_path):
    """A protocol listing a writer feature this vacuum does not know (one newer than it) is
    refused, naming it, before anything is listed. (Before: only reader features were checked.)"""
    path = tmp_path / "future"
    for b in range(2):
        write_deltalake(str(path), pa.table({"id": pa.array([b], pa.int64())}), mode="append")
    protocol = {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": [],
                             "writerFeatures": ["appendOnly", "lakehouseTestFutureFeature"]}}
    (path / "_delta_log" / f"{2:020}.json").write_text(
        json.dumps({"commitInfo": {"operation": "UPGRADE PROTOCOL"}}) + "\n" + json.dumps(protocol) + "\n")
    d.age_files(path)
    (path / "stray.parquet").write_bytes(b"x")
    os.utime(path / "stray.parquet", (0, 0))
    with pytest.raises(duckdb.Error, match="uses writer feature 'lakehouseTestFutureFeature'"):
        con.execute(f"SELECT * FROM lakehouse_vacuum('{path}', dry_run := false)").fetchall()
    assert (path / "stray.parquet").exists()


def absolute_paths_table(root: Path) -> tuple[Path, set[str]]:
    """A deltalake table whose log names its files by absolute `file:` paths of `root`, as Spark
    writes them (`file:/dir/part-….parquet`: a shallow clone's log, or files added from outside
    the table), aged 30 days; with one untracked file. Returns the table and its live files."""
    for b in range(3):
        rows = [{"id": b * 10 + i, "p": "a" if i % 2 else "b"} for i in range(10)]
        write_deltalake(str(root), pa.Table.from_pylist(rows), mode="append", partition_by=["p"])
    for log in (root / "_delta_log").glob("*.json"):
        lines = []
        for line in log.read_text().splitlines():
            action = json.loads(line)
            for kind in ("add", "remove"):
                if kind in action and "://" not in action[kind]["path"]:
                    action[kind]["path"] = f"file:{root / action[kind]['path']}"  # as Spark writes them
            lines.append(json.dumps(action))
        log.write_text("\n".join(lines) + "\n")
    live = {str(root / p) for p in d.data_listing(root)}
    (root / "p=a" / "untracked.parquet").write_bytes(b"not a table file")
    d.age_files(root)
    return root, live


@pytest.mark.parametrize("spelling", ["symlink", "dotdot"])
def test_vacuum_through_another_spelling_of_the_table_keeps_live_files(con, spark, tmp_path, spelling):
    """Named by a symlink to its directory, or with `..`, the table's live files (named by the log
    under the real path) are not untracked: only the untracked file is listed, by its real path.
    (Before: every live file was listed — and a real run deleted it.)"""
    real = tmp_path / "real" / "events"
    real.parent.mkdir()
    real, live = absolute_paths_table(real)
    if spelling == "symlink":
        (tmp_path / "link").symlink_to(tmp_path / "real", target_is_directory=True)
        named = tmp_path / "link" / "events"
    else:
        named = tmp_path / "real" / ".." / "real" / "events"
    # Spark reads absolute `file:` paths; deltalake 1.6.6 and DuckDB's delta 1.5.5 join them to
    # the root and fail to open them.
    before = d.rows_spark(spark, real)
    assert len(before) == 30 and d.rows_spark(spark, named) == before
    listed = vacuum_paths(con, named, retention_hours=RETENTION_H)
    assert listed == {str(real.resolve() / "p=a" / "untracked.parquet")}, listed
    con.execute(f"SELECT * FROM lakehouse_vacuum('{named}', dry_run := false)").fetchall()
    assert all(Path(p).exists() for p in live)
    assert d.rows_spark(spark, named) == before


def test_vacuum_refuses_a_log_naming_files_outside_the_table(con, tmp_path):
    """The table was moved: its log names every file by an absolute path under the old location.
    The files in the new directory cannot be told apart from untracked ones — refused, naming the
    path; nothing deleted."""
    old = tmp_path / "old" / "events"
    old.parent.mkdir()
    absolute_paths_table(old)
    moved = tmp_path / "moved"
    shutil.move(str(old), str(moved))
    listing = d.listing(moved)
    with pytest.raises(duckdb.Error, match="prefix mismatch: .* names '.*old/events/"):
        con.execute(f"SELECT * FROM lakehouse_vacuum('{moved}', dry_run := false)").fetchall()
    assert d.listing(moved) == listing
