"""Delta Lake tables: profile, health, compaction, vacuum and the gate, against engines we did not
write.

Tables are written by deltalake (delta-rs) 1.6.6, by Apache Spark 4.0.1 + Delta Lake 4.0.0 (the
session's one SparkSession, tables by path) and come from the Delta Acceptance Tests
(``../shared/fixtures/delta-dat``, copied before anything writes). Every figure and row is compared
with readers we did not write (see delta_tables.py): deltalake, DuckDB's delta extension,
polars and Spark for rows; deltalake ``get_add_actions``, DuckDB ``delta_list_files`` and Spark's
own snapshot for live files; deltalake's and Spark's vacuum dry runs, on twin copies, for vacuum.

Where a peer is known to be wrong the test says so and asserts the peer's behaviour too, so the
test notices when the peer changes: deltalake's full vacuum deletes deletion-vector files that live
files still use, and only looks at a path's first component for hidden names.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

import conftest as c
import delta_tables as d

DAT = c.fixtures_dir() / "delta-dat"
DAT_CASES = ["basic_append", "basic_partitioned", "multi_partitioned", "with_schema_change"]
TARGET_MB = 1.0  # compaction target: every fragmented partition here fits one output file
RETENTION_H = 168  # Delta's default delta.deletedFileRetentionDuration


# --------------------------------------------------------------------------- SQL helpers


def lit(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(lit(v) for v in value) + "]"
    return "'" + str(value).replace("'", "''") + "'"


def call(con: duckdb.DuckDBPyConnection, function: str, table: Any, **params: Any) -> list[dict[str, Any]]:
    """``SELECT * FROM function(table, name := value, …)``, rows as dicts."""
    args = [lit(str(table))] + [f"{k} := {lit(v)}" for k, v in params.items()]
    cursor = con.execute(f"SELECT * FROM {function}({', '.join(args)})")
    names = [x[0] for x in cursor.description]
    return [dict(zip(names, row)) for row in cursor.fetchall()]


def profile(con, table, **params) -> dict[str, dict[str, Any]]:
    rows = call(con, "lakehouse_fragmentation", table, **params)
    labels = [r["partition"] for r in rows]
    assert len(labels) == len(set(labels)), f"one row per partition: {labels}"
    return {r["partition"]: r for r in rows}


def compact(con, table, **params) -> dict[str, dict[str, Any]]:
    rows = call(con, "lakehouse_compact", table, **params)
    return {r["partition"]: r for r in rows}


def vacuum(con, table, **params) -> list[dict[str, Any]]:
    return call(con, "lakehouse_vacuum", table, **params)


def error_of(con, sql: str) -> str:
    with pytest.raises(duckdb.Error) as info:
        con.execute(sql).fetchall()
    return str(info.value)


def utc(value: Any) -> dt.datetime:
    """A DuckDB TIMESTAMP (taken as UTC) or TIMESTAMPTZ as a naive UTC datetime."""
    return d.comparable(value)


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def dcon():
    """DuckDB with its delta extension (the independent reader; the pip wheel, LOADed)."""
    con = d.delta_connection()
    yield con
    con.close()


@pytest.fixture(scope="module")
def dl_tables(tmp_path_factory) -> dict[str, Path]:
    """Pristine deltalake-written tables (copied by each test that writes)."""
    root = tmp_path_factory.mktemp("delta-deltalake")
    d.build_deltalake_fragmented(root / "frag")
    d.build_deltalake_unpartitioned(root / "unpart")
    d.build_deltalake_with_tombstones(root / "tomb")
    return {name: root / name for name in ("frag", "unpart", "tomb")}


@pytest.fixture(scope="module")
def sp_tables(spark, tmp_path_factory) -> dict[str, Path]:
    """Pristine Spark-written tables (built once: ~35 s on 2 cores)."""
    root = tmp_path_factory.mktemp("delta-spark")
    d.build_spark_small_inserts(spark, root / "sfrag")
    d.build_spark_deletion_vectors(spark, root / "sdv")
    d.build_spark_column_mapping(spark, root / "scm")
    d.build_spark_column_mapping_id(spark, root / "scm_id")
    return {name: root / name for name in ("sfrag", "sdv", "scm", "scm_id")}


@pytest.fixture(scope="module", autouse=True)
def _dat_present():
    if not all((DAT / case / "delta" / "_delta_log").is_dir() for case in DAT_CASES):
        pytest.fail(f"the DAT fixtures are not at {DAT}: set LAKEHOUSE_FIXTURES")


def dat_copy(case: str, where: Path) -> Path:
    return d.twin(DAT / case / "delta", where / case)


def all_tables(dl_tables, sp_tables) -> dict[str, Path]:
    return {**dl_tables, **sp_tables}


# DAT tables whose partition directories Spark named (the label must be the directory).
SPARK_WRITTEN = {"multi_partitioned", "basic_partitioned"}


def source(name: str, dl_tables, sp_tables) -> Path:
    if name in DAT_CASES:
        return DAT / name / "delta"
    return all_tables(dl_tables, sp_tables)[name]


# --------------------------------------------------------------------------- profile


def assert_profile_matches(con, dcon, spark, path: Path, small_mb: float, spark_written: bool) -> dict[str, dict]:
    """lakehouse_fragmentation == deltalake (files, sizes, records, labels), == DuckDB (files,
    records, deletion vectors, labels), == Spark's snapshot (everything) and DESCRIBE DETAIL."""
    ours = profile(con, path, small_file_threshold_mb=small_mb)
    spark_files = d.files_spark(spark, path)
    columns, _ = d.logical_partition_columns(spark, path)
    spark_ref = d.expected_profile(spark_files, small_mb)
    deltalake_ref = d.expected_profile(d.files_deltalake(path), small_mb)
    duckdb_ref = d.expected_profile(d.files_duckdb(dcon, path, columns), small_mb)

    assert set(spark_ref) == set(deltalake_ref) == set(duckdb_ref), "the references agree on the partitions"
    assert set(ours) == set(spark_ref), (sorted(ours), sorted(spark_ref))
    for label, row in ours.items():
        assert row["spec_id"] == 0, row
        for key in d.FIGURES:
            assert row[key] == spark_ref[label][key], (label, key, row, spark_ref[label])
            for other in (deltalake_ref, duckdb_ref):
                if other[label][key] is not None:
                    assert row[key] == other[label][key], (label, key, row, other[label])
        assert row["fragmentation_ratio"] == pytest.approx(spark_ref[label]["fragmentation_ratio"], abs=1e-4)
        assert row["requires_compaction"] == spark_ref[label]["requires_compaction"], row
        assert row["total_size_mb"] == pytest.approx(row["total_size_bytes"] / d.MIB, abs=0.005)
    detail = d.spark_detail(spark, path)
    assert sum(r["total_files"] for r in ours.values()) == detail["numFiles"]
    assert sum(r["total_size_bytes"] for r in ours.values()) == detail["sizeInBytes"]
    if spark_written and columns:
        # Spark named the directories: each file sits in the directory its label spells.
        for f in spark_files:
            assert os.path.relpath(os.path.dirname(f.path), path) == f.label, f
    return ours


@pytest.mark.parametrize("case", DAT_CASES)
def test_profile_dat_tables(con, dcon, spark, case):
    """The four DAT tables (Spark 3.3 / Delta 2.1): NULL, escaped ('/%20%f') and binary (an emoji)
    partition values, removed files, a schema change."""
    ours = assert_profile_matches(con, dcon, spark, DAT / case / "delta", 0.0009, case in SPARK_WRITTEN)
    if case == "multi_partitioned":
        assert set(ours) == {"letter=%2F%2520%25f/date=1970-01-01/data=hello", "letter=b/date=1970-01-01/data=😈"}


@pytest.mark.parametrize("name", ["frag", "unpart", "tomb"])
def test_profile_deltalake_tables(con, dcon, spark, dl_tables, name):
    """Tables deltalake wrote in many small appends. deltalake names directories its own way
    (``s=with%20space``, ``s=%F0%9F%98%88``); the label is Delta/Hive's (``s=with space``)."""
    ours = assert_profile_matches(con, dcon, spark, dl_tables[name], d.SMALL_MB, spark_written=False)
    if name == "frag":
        for (s, n, day), kind in d.DL_FRAGMENTED.items():
            row = ours[d.dl_label(s, n, day)]
            # A partition of a single small file has nothing to merge: not degraded.
            assert row["requires_compaction"] == (kind not in ("bulk", "single")), (kind, row)
        assert "s=with space/n=2/d=2026-10-01" in ours and "s=a%2Fb/n=1/d=2026-10-02" in ours
        assert "s=__HIVE_DEFAULT_PARTITION__/n=__HIVE_DEFAULT_PARTITION__/d=2026-10-01" in ours
    if name == "unpart":
        assert list(ours) == [d.UNPARTITIONED]


@pytest.mark.parametrize("name", ["sfrag", "sdv"])
def test_profile_spark_tables(con, dcon, spark, sp_tables, name):
    """Tables Spark wrote in many small INSERTs (with a checkpoint), and with deletion vectors:
    delete_files counts the live files carrying one (Spark's snapshot and DuckDB agree)."""
    ours = assert_profile_matches(con, dcon, spark, sp_tables[name], d.SMALL_MB, spark_written=True)
    if name == "sdv":
        assert {k: v["delete_files"] for k, v in ours.items()} == {"part=a": 8, "part=b": 8, "part=d": 0}


def test_profile_column_mapping_labels_by_logical_name(con, spark, sp_tables):
    """Column mapping keys partitionValues (and Spark's directories) by physical name
    (``col-<uuid>=x y``); the label uses the column's name, as Spark's DESCRIBE DETAIL and
    deltalake do. (DuckDB's delta_list_files 1.5.5 looks the logical name up and gets NULL: left
    out here.)"""
    path = sp_tables["scm"]
    ours = profile(con, path, small_file_threshold_mb=d.SMALL_MB)
    spark_ref = d.expected_profile(d.files_spark(spark, path), d.SMALL_MB)
    deltalake_ref = d.expected_profile(d.files_deltalake(path), d.SMALL_MB)
    assert set(ours) == set(spark_ref) == set(deltalake_ref) == {"cat=x y", "cat=z"}
    for label, row in ours.items():
        assert {k: row[k] for k in d.FIGURES} == {k: spark_ref[label][k] for k in d.FIGURES}


def test_summary_matches_the_profile(con, dl_tables):
    path = dl_tables["frag"]
    ref = d.expected_profile(d.files_deltalake(path), d.SMALL_MB)
    (got,) = call(con, "lakehouse_fragmentation_summary", path, small_file_threshold_mb=d.SMALL_MB, target_file_size_mb=TARGET_MB)
    degraded = [r for r in ref.values() if r["requires_compaction"]]
    degraded_bytes = sum(r["total_size_bytes"] for r in degraded)
    assert got["total_partitions"] == len(ref) == 9
    assert got["total_lakehouse_files"] == sum(r["total_files"] for r in ref.values())
    assert got["total_small_files"] == sum(r["small_files"] for r in ref.values())
    # 7 partitions reach the ratio; one of them holds a single small file: nothing to merge.
    assert got["fragmented_partition_count"] == len(degraded) == 6
    assert got["compactable_bytes"] == degraded_bytes
    assert got["avg_fragmentation_ratio"] == pytest.approx(sum(r["fragmentation_ratio"] for r in ref.values()) / len(ref), abs=1e-4)
    assert got["compactable_mb"] == pytest.approx(degraded_bytes / d.MIB, abs=0.01)
    # A range: the calibrated local-disk model below, files before / after above — at most the
    # degraded files over one file per degraded partition.
    most = sum(r["total_files"] for r in degraded) / len(degraded)
    assert 1 < got["projected_speedup_low"] <= got["projected_speedup_high"] <= round(most, 2), got


# --------------------------------------------------------------------------- metadata health


def health(con, path, **params) -> dict[str, Any]:
    (row,) = call(con, "lakehouse_metadata_health", path, **params)
    return row


def test_health_of_a_spark_table_with_a_checkpoint(con, spark, sp_tables, tmp_path):
    """sfrag: 13 commits, Spark's checkpoint at version 10 (its own ``_last_checkpoint`` says so),
    nothing removed, nothing to vacuum (Spark's dry run agrees)."""
    path = d.twin(sp_tables["sfrag"], tmp_path / "sfrag")
    row = health(con, path)
    history = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()
    last_checkpoint = json.loads((path / "_delta_log" / "_last_checkpoint").read_text())
    version = d.current_version(path)
    assert row["format"] == "delta"
    assert row["snapshots"] == len(history) == len(d.commit_versions(path)) == version + 1
    assert row["data_files"] == d.spark_detail(spark, path)["numFiles"]
    assert row["position_delete_files"] == 0
    assert row["metadata_files"] == len(d.log_files(path)) == version + 2  # commits + one checkpoint
    assert row["metadata_bytes"] == sum(p.stat().st_size for p in d.log_files(path))
    assert row["delta_log"]["last_checkpoint_version"] == last_checkpoint["version"] == 10
    assert row["delta_log"]["commits_since_checkpoint"] == version - 10
    assert row["delta_log"]["log_retention_days"] == 30 and row["delta_log"]["deleted_file_retention_hours"] == 168
    assert row["delta_log"]["tombstones"] == d.spark_tombstones(spark, path) == 0
    assert row["delta_log"]["expired_tombstones"] == 0
    twin = d.twin(path, tmp_path / "twin")
    assert row["delta_log"]["vacuumable_files"] == len(d.vacuum_spark(spark, twin, RETENTION_H)) == 0


def test_health_of_an_aged_deletion_vector_table(con, dcon, spark, sp_tables, tmp_path):
    """sdv aged: deletion vectors (Spark's snapshot and DuckDB count them), tombstones (Spark keeps
    the unexpired ones in its state; the expired ones are those backdated here), no checkpoint,
    and vacuumable files as many as Spark's VACUUM dry run lists."""
    path = d.twin(sp_tables["sdv"], tmp_path / "sdv")
    scenario = d.age_vacuum_scenario(path, [6, 9], "part=a")
    row = health(con, path)
    columns, _ = d.logical_partition_columns(spark, path)
    version = d.current_version(path)
    assert row["format"] == "delta"
    assert row["snapshots"] == len(d.commit_versions(path)) == version + 1 == 10
    assert row["data_files"] == d.spark_detail(spark, path)["numFiles"]
    assert row["position_delete_files"] == sum(1 for f in d.files_spark(spark, path) if f.has_dv) \
        == sum(1 for f in d.files_duckdb(dcon, path, columns) if f.has_dv) == 16
    assert row["delta_log"]["last_checkpoint_version"] is None
    assert row["delta_log"]["commits_since_checkpoint"] == version + 1
    backdated = {(r["path"], json.dumps(r.get("deletionVector"), sort_keys=True)) for r in scenario.backdated_removes}
    assert row["delta_log"]["expired_tombstones"] == len(backdated)
    assert row["delta_log"]["tombstones"] - row["delta_log"]["expired_tombstones"] == d.spark_tombstones(spark, path)
    twin = d.twin(path, tmp_path / "twin")
    assert row["delta_log"]["vacuumable_files"] == len(d.vacuum_spark(spark, twin, RETENTION_H))


def test_health_reads_retention_properties(con, spark, dl_tables, tmp_path):
    """delta.logRetentionDuration / delta.deletedFileRetentionDuration set by deltalake; the
    deleted-file retention moves what is expired and vacuumable (Spark's dry run at the same
    retention agrees)."""
    path = d.twin(dl_tables["tomb"], tmp_path / "tomb")
    d.age_vacuum_scenario(path, [6, 8], "s=a", kinds=("untracked", "young"))
    DeltaTable(str(path)).alter.set_table_properties(
        {"delta.logRetentionDuration": "interval 60 days", "delta.deletedFileRetentionDuration": "interval 240 hours"}
    )
    row = health(con, path)
    assert row["delta_log"]["log_retention_days"] == 60 and row["delta_log"]["deleted_file_retention_hours"] == 240
    assert row["delta_log"]["tombstones"] - row["delta_log"]["expired_tombstones"] == d.spark_tombstones(spark, path)
    twin = d.twin(path, tmp_path / "twin")
    assert row["delta_log"]["vacuumable_files"] == len(d.vacuum_spark(spark, twin, 240)) > 0


# --------------------------------------------------------------------------- compaction


def input_dirs(path: Path, version: int) -> dict[str, set[str]]:
    """Directory (relative) of each removed file in commit ``version``."""
    out: dict[str, set[str]] = {}
    for action in d.commit_actions(path, version):
        if "remove" in action:
            rel = d._abs(path, action["remove"]["path"])
            out.setdefault(os.path.dirname(rel), set()).add(rel)
    return out


def assert_optimize_commit(spark, path: Path, version: int, plan: dict[str, dict], partition_columns: list[str]) -> None:
    """The commit at ``version`` is one OPTIMIZE (Spark's DESCRIBE HISTORY and deltalake's
    history say so) of remove + add actions with dataChange=false; each new file sits in its
    inputs' directory, holds no partition column, and its stats state what pyarrow computes from
    its rows."""
    history = spark.sql(f"DESCRIBE HISTORY delta.`{path}` LIMIT 1").collect()[0]
    assert (history["version"], history["operation"]) == (version, "OPTIMIZE")
    assert DeltaTable(str(path)).history(1)[0]["operation"] == "OPTIMIZE"
    actions = d.commit_actions(path, version)
    removes = [a["remove"] for a in actions if "remove" in a]
    adds = [a["add"] for a in actions if "add" in a]
    assert [a["commitInfo"]["operation"] for a in actions if "commitInfo" in a] == ["OPTIMIZE"]
    assert all(x["dataChange"] is False for x in removes + adds), "compaction changes no data"
    compacted = [r for r in plan.values() if r["verdict"] == "compacted"]
    assert len(removes) == sum(r["input_files"] for r in compacted)
    assert len(adds) == sum(r["output_files"] for r in compacted)
    dirs = {os.path.dirname(d._abs(path, r["path"])) for r in removes}
    for add in adds:
        file = d._abs(path, add["path"])
        assert os.path.dirname(file) in dirs, f"{file} is not beside its inputs"
        assert not set(pq.read_schema(file).names) & set(partition_columns), "partition columns are not stored"
        stats = json.loads(add["stats"])
        truth = d.parquet_stats(file)
        assert stats["numRecords"] == truth["numRecords"]
        assert stats["nullCount"] == {k: v for k, v in truth["nullCount"].items() if k in stats["nullCount"]}
        assert set(stats["nullCount"]) == set(truth["nullCount"])
        for bound in ("minValues", "maxValues"):
            for column, value in stats[bound].items():
                expected = truth[bound][column]
                if isinstance(expected, dt.datetime):
                    got = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
                    assert got.astimezone(dt.timezone.utc).replace(tzinfo=None) == d.comparable(expected), (column, bound)
                elif isinstance(expected, dt.date):
                    assert value == expected.isoformat(), (column, bound)
                elif isinstance(expected, float):
                    assert value == pytest.approx(expected), (column, bound)
                else:
                    assert value == expected, (column, bound, value, expected)
            # Every column with non-null values has both bounds (strings may be truncated:
            # then the bound is a prefix, never a wrong value).
            assert set(stats[bound]) >= {k for k, v in truth[bound].items() if not isinstance(v, str)}, bound


def expected_plan(ref: dict[str, dict], min_input_files: int = 2) -> set[str]:
    """Labels a compaction must rewrite: degraded, with at least ``min_input_files`` small files."""
    return {label for label, r in ref.items() if r["requires_compaction"] and r["small_files"] >= min_input_files}


def check_compaction(con, dcon, spark, path: Path, small_mb: float, polars: bool = True) -> dict[str, dict]:
    """Dry run, then compaction: plan from the reference profile, rows identical through every
    reader, time travel to the version before, the OPTIMIZE commit, files as planned."""
    readers_before = d.rows_everywhere(spark, dcon, path, polars=polars)
    before = readers_before["spark"]
    assert all(rows == before for rows in readers_before.values()), "the readers disagree before we start"
    ref = d.expected_profile(d.files_spark(spark, path), small_mb)
    files_before = {label: {f.path for f in group} for label, group in d.by_label(d.files_spark(spark, path)).items()}
    version_before = d.current_version(path)
    planned = expected_plan(ref)

    listing = d.listing(path)
    dry = compact(con, path, small_file_threshold_mb=small_mb, target_file_size_mb=TARGET_MB, dry_run=True)
    assert d.listing(path) == listing, "a dry run writes nothing"
    assert {label for label, r in dry.items() if r["verdict"] == "would compact"} == planned
    assert all(r["dry_run"] is True and r["snapshot_id"] is None for r in dry.values())

    done = compact(con, path, small_file_threshold_mb=small_mb, target_file_size_mb=TARGET_MB)
    assert set(done) == set(ref)
    assert {label for label, r in done.items() if r["verdict"] == "compacted"} == planned
    for label, row in done.items():
        assert row["files_before"] == ref[label]["total_files"] and row["small_files_before"] == ref[label]["small_files"]
        assert row["files_after"] == row["files_before"] - row["input_files"] + row["output_files"], row
        if label in planned:
            assert row["input_files"] == ref[label]["small_files"] and row["output_files"] == 1, row
            assert (row["input_files"], row["output_files"]) == (dry[label]["input_files"], dry[label]["output_files"])
        else:
            assert row["files_after"] == row["files_before"] and row["output_files"] == 0, row

    version = d.current_version(path)
    if planned:
        assert version == version_before + 1
        assert {r["snapshot_id"] for r in done.values() if r["verdict"] == "compacted"} == {version}
        (location,) = {r["metadata_location"] for r in done.values() if r["verdict"] == "compacted"}
        assert Path(location) == path / "_delta_log" / f"{version:020d}.json" and Path(location).is_file()
        columns, _ = d.logical_partition_columns(spark, path)
        assert_optimize_commit(spark, path, version, done, columns)
    else:
        assert version == version_before, "nothing to compact: nothing committed"

    after = d.rows_everywhere(spark, dcon, path, polars=polars)
    for reader, rows in after.items():
        assert rows == before, f"{reader} reads other rows after compaction"
    if planned:
        for reader, rows in d.rows_everywhere(spark, dcon, path, version=version_before, polars=polars).items():
            assert rows == before, f"{reader}: time travel to version {version_before}"

    ref_after = d.expected_profile(d.files_spark(spark, path), small_mb)
    files_after = {label: {f.path for f in group} for label, group in d.by_label(d.files_spark(spark, path)).items()}
    deltalake_after = d.expected_profile(d.files_deltalake(path), small_mb)
    assert set(deltalake_after) == set(ref_after)
    for label, row in deltalake_after.items():  # deltalake does not report deletion vectors
        assert {**row, "delete_files": ref_after[label]["delete_files"]} == ref_after[label], label
    for label, row in done.items():
        assert ref_after[label]["total_files"] == row["files_after"], (label, row)
        if label not in planned:
            assert files_after[label] == files_before[label], f"{label} was not to be touched"
    return done


@pytest.mark.parametrize("name", ["frag", "unpart", "sfrag"])
def test_compaction_keeps_rows_identical(con, dcon, spark, dl_tables, sp_tables, tmp_path, name):
    path = d.twin(source(name, dl_tables, sp_tables), tmp_path / name)
    done = check_compaction(con, dcon, spark, path, d.SMALL_MB)
    if name == "frag":
        assert done[d.dl_label("single", 1, d.D1)]["verdict"] == "healthy"  # one small file: nothing to merge
        assert done[d.dl_label("50%", 3, d.D2)]["verdict"] == "healthy"
    # A second run finds nothing to do and commits nothing.
    version = d.current_version(path)
    again = compact(con, path, small_file_threshold_mb=d.SMALL_MB, target_file_size_mb=TARGET_MB)
    assert not [r for r in again.values() if r["verdict"] == "compacted"] and d.current_version(path) == version


@pytest.mark.parametrize("case", DAT_CASES)
def test_dat_tables_still_read_as_expected_after_compaction(con, dcon, spark, tmp_path, case):
    """Every DAT file is small at 1 MiB; after compaction every reader still returns the case's
    expected rows (``expected/latest``)."""
    path = dat_copy(case, tmp_path)
    expected = d.expected_dat_rows(DAT / case)
    # polars 2.1 cannot read a binary partition column (multi_partitioned's `data`): "unsupported
    # data type when reading CSV: binary", before anything of ours runs.
    polars = case != "multi_partitioned"
    check_compaction(con, dcon, spark, path, 1.0, polars=polars)
    for reader, rows in d.rows_everywhere(spark, dcon, path, polars=polars).items():
        assert rows == expected, reader


@pytest.mark.parametrize(
    "name, sort_order, partition_column",
    [
        ("frag", "amount DESC NULLS LAST, id", "s"),
        ("frag", "zorder(amount, ts)", "s"),
        ("sfrag", "amount DESC NULLS LAST, id", "region"),
        ("sfrag", "zorder(amount, id)", "region"),
    ],
)
def test_sorted_compaction_of_a_delta_table(con, dcon, spark, dl_tables, sp_tables, tmp_path, name, sort_order,
                                            partition_column):
    """sort_order on a Delta table deltalake or Spark wrote (no sort order of its own): the
    rewrite sorts, every reader reads the same rows, and a sorted file's rows (read by pyarrow in
    file order) follow the order; a partition column cannot be a sort column (it is constant in
    a file)."""
    path = d.twin(source(name, dl_tables, sp_tables), tmp_path / name)
    before = d.rows_everywhere(spark, dcon, path)
    files_before = {f.path for f in d.files_deltalake(path)}
    done = compact(con, path, small_file_threshold_mb=d.SMALL_MB, target_file_size_mb=TARGET_MB, sort_order=sort_order)
    compacted = [r for r in done.values() if r["verdict"] == "compacted"]
    assert compacted
    label = sort_order if sort_order.startswith("zorder") else "sort(amount DESC NULLS LAST, id ASC NULLS FIRST)"
    assert {r["strategy"] for r in compacted} == {label}
    for reader, rows in d.rows_everywhere(spark, dcon, path).items():
        assert rows == before["spark"], f"{reader} reads other rows after a sorted compaction"
    new = [f.path for f in d.files_deltalake(path) if f.path not in files_before]
    assert new
    if not sort_order.startswith("zorder"):
        for f in new:
            rows = pq.read_table(f, columns=["amount", "id"]).to_pylist()
            keys = [(r["amount"] is None, -(r["amount"] or 0), r["id"] is not None, r["id"] or 0) for r in rows]
            assert keys == sorted(keys), f
    message = error_of(con, f"SELECT * FROM lakehouse_compact('{path}', sort_order := '{partition_column}')")
    assert f"lakehouse_compact: sort_order names column '{partition_column}', which is not a column the rewrite can sort by" in message


def test_compaction_is_invisible_to_a_streaming_reader(con, spark, dl_tables, tmp_path):
    """A Delta streaming source fails on a commit that changes data ("Detected a data update")
    and skips dataChange=false files: reading from our OPTIMIZE commit yields no row."""
    path = d.twin(dl_tables["unpart"], tmp_path / "unpart")
    compact(con, path, small_file_threshold_mb=d.SMALL_MB, target_file_size_mb=TARGET_MB)
    version = d.current_version(path)
    assert [a["commitInfo"]["operation"] for a in d.commit_actions(path, version) if "commitInfo" in a] == ["OPTIMIZE"]
    name = f"delta_stream_{os.getpid()}"
    query = (
        spark.readStream.format("delta").option("startingVersion", version).load(str(path))
        .writeStream.format("memory").queryName(name).option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True).start()
    )
    query.awaitTermination(120)
    assert query.exception() is None, query.exception()
    assert spark.table(name).count() == 0


def test_compacting_one_partition_by_its_label(con, spark, dl_tables, tmp_path):
    """``partitions`` takes labels as the profile prints them (escaped): only that partition."""
    path = d.twin(dl_tables["frag"], tmp_path / "frag")
    label = d.dl_label("a/b", 1, d.D2)
    assert label == "s=a%2Fb/n=1/d=2026-10-02"
    before = {k: {f.path for f in g} for k, g in d.by_label(d.files_spark(spark, path)).items()}
    rows = compact(con, path, small_file_threshold_mb=d.SMALL_MB, target_file_size_mb=TARGET_MB, partitions=[label])
    assert [k for k, r in rows.items() if r["verdict"] == "compacted"] == [label]
    after = {k: {f.path for f in g} for k, g in d.by_label(d.files_spark(spark, path)).items()}
    assert len(after[label]) == 1 and not after[label] & before[label]
    assert {k: v for k, v in after.items() if k != label} == {k: v for k, v in before.items() if k != label}


def test_compaction_of_deletion_vector_partitions_keeps_rows(con, dcon, spark, sp_tables, tmp_path):
    """Partitions whose small files carry deletion vectors are rewritten with the vectors applied:
    no new file has one, each remove carries the vector it retires, the rows purged are the
    vectors' cardinalities, and every reader returns the same rows (also as of before); part=d
    (no vectors) is compacted too."""
    path = d.twin(sp_tables["sdv"], tmp_path / "sdv")
    columns, _ = d.logical_partition_columns(spark, path)
    before_files = d.by_label(d.files_spark(spark, path))
    before = d.rows_everywhere(spark, dcon, path)
    assert all(rows == before["spark"] for rows in before.values())
    version_before = d.current_version(path)
    vectors = {label: sum(1 for f in files if f.has_dv) for label, files in before_files.items()}
    done = compact(con, path, small_file_threshold_mb=d.SMALL_MB, target_file_size_mb=TARGET_MB)
    assert done["part=d"]["verdict"] == "compacted"
    after_files = d.by_label(d.files_spark(spark, path))
    duck_after = d.by_label(d.files_duckdb(dcon, path, columns))
    removes = [a["remove"] for a in d.commit_actions(path, d.current_version(path)) if "remove" in a]
    for label in ("part=a", "part=b"):
        row = done[label]
        assert row["verdict"] == "compacted", row
        assert f"applying {vectors[label]} deletion vectors" in row["reason"], row
        assert row["delete_files_removed"] == vectors[label] > 0, row
        assert not any(f.has_dv for f in after_files[label]) and not any(f.has_dv for f in duck_after[label])
        retired = [r for r in removes if r["path"].startswith(f"{label}/") and r.get("deletionVector")]
        assert len(retired) == vectors[label]
        assert row["rows_purged"] == sum(r["deletionVector"]["cardinality"] for r in retired) > 0, row
    for reader, rows in d.rows_everywhere(spark, dcon, path).items():
        assert rows == before["spark"], reader
    for reader, rows in d.rows_everywhere(spark, dcon, path, version=version_before).items():
        assert rows == before["spark"], f"{reader}: time travel"
    assert_optimize_commit(spark, path, d.current_version(path), done, columns)


@pytest.mark.parametrize("name", ["scm", "scm_id"])
def test_compaction_of_column_mapped_tables(con, dcon, spark, sp_tables, tmp_path, name):
    """Column mapping by name (a rename) and by id (renames, a nested rename, a dropped and an
    added column, deletion vectors): the rewrite reads and writes physical names with the
    table's field ids, keys stats by physical name, drops the dropped column; Spark and DuckDB
    read the same rows (also as of before), and Spark keeps writing."""
    path = d.twin(sp_tables[name], tmp_path / name)
    before = d.rows_spark(spark, path)
    # Peer bug (DuckDB's delta extension 1.5.5): under column mapping it reads the partition
    # column as NULL. It is held to reading the table as it did before.
    duck_before = d.rows_duckdb(dcon, path)
    assert duck_before != before, "DuckDB's delta extension reads mapped partition columns now: compare with Spark"
    version = d.current_version(path)
    rows = compact(con, path, small_file_threshold_mb=d.SMALL_MB, target_file_size_mb=TARGET_MB)
    assert any(r["verdict"] == "compacted" for r in rows.values()), rows
    schema = json.loads(next(a["metaData"] for a in reversed([a for v in range(version + 1)
                                                               for a in d.commit_actions(path, v)]) if "metaData" in a)["schemaString"])
    mapping = {f["metadata"]["delta.columnMapping.physicalName"]: f["metadata"]["delta.columnMapping.id"]
               for f in schema["fields"]}
    partition = {"cat"}
    adds = [a["add"] for a in d.commit_actions(path, version + 1) if "add" in a]
    assert adds
    for add in adds:
        file_schema = pq.read_schema(d._abs(path, add["path"]))
        data_columns = {f["metadata"]["delta.columnMapping.physicalName"] for f in schema["fields"] if f["name"] not in partition}
        assert set(file_schema.names) == data_columns, (file_schema.names, data_columns)
        for field in file_schema:
            assert int(field.metadata[b"PARQUET:field_id"]) == mapping[field.name], field
        stats = json.loads(add["stats"])
        assert set(stats["nullCount"]) <= data_columns, stats
    assert d.rows_spark(spark, path) == before
    assert d.rows_duckdb(dcon, path) == duck_before
    assert d.rows_spark(spark, path, version=version) == before, "time travel"
    d.spark_sql(spark, f"DELETE FROM delta.`{path}` WHERE id % 3 = 0")
    twin = d.twin(sp_tables[name], tmp_path / f"{name}-untouched")
    d.spark_sql(spark, f"DELETE FROM delta.`{twin}` WHERE id % 3 = 0")
    assert d.rows_spark(spark, path) == d.rows_spark(spark, twin)


# --------------------------------------------------------------------------- concurrency


def while_paused(run, concurrent_change, root: Path, monkeypatch) -> dict:
    """Runs ``run()`` with its commit held back until ``concurrent_change()`` has committed, once
    its rewrite has written a new Parquet file (conftest.run_paused_before_commit)."""
    existing = d.data_listing(root)
    return c.run_paused_before_commit(run, concurrent_change, lambda: bool(d.data_listing(root) - existing), monkeypatch)


def test_an_append_committed_meanwhile_is_kept(con, dcon, spark, dl_tables, tmp_path, monkeypatch):
    """deltalake appends while our compaction waits to commit: OPTIMIZE does not conflict with a
    blind append, so ours commits after it, and the appended rows stay."""
    path = d.twin(dl_tables["frag"], tmp_path / "frag")
    before = d.rows_spark(spark, path)
    extra = pa.concat_tables([d._rows(range(90_000, 90_005), "plain", 1, d.D1), d._rows(range(90_005, 90_008), "new", 9, d.D3)])
    appended_version: list[int] = []

    def append():
        write_deltalake(str(path), extra, mode="append")
        appended_version.append(d.current_version(path))

    run = lambda: compact(con, path, small_file_threshold_mb=d.SMALL_MB, target_file_size_mb=TARGET_MB)  # noqa: E731
    outcome = while_paused(run, append, path, monkeypatch)
    assert outcome["paused"] and "rows" in outcome, outcome
    version = d.current_version(path)
    assert version == appended_version[0] + 1
    assert {r["snapshot_id"] for r in outcome["rows"].values() if r["verdict"] == "compacted"} == {version}
    appended_files = {d._abs(path, a["add"]["path"]) for a in d.commit_actions(path, appended_version[0]) if "add" in a}
    assert appended_files <= {f.path for f in d.files_spark(spark, path)}, "the concurrent append's files are live"
    expected = sorted(before + d.arrow_multiset(extra), key=repr)
    for reader, rows in d.rows_everywhere(spark, dcon, path).items():
        assert rows == expected, reader


def test_a_delete_of_an_input_committed_meanwhile_aborts(con, dcon, spark, dl_tables, tmp_path, monkeypatch):
    """deltalake deletes rows of a file we are rewriting (a remove with dataChange=true): our
    commit must fail with 'commit conflict' and leave nothing behind — no commit, no new file."""
    path = d.twin(dl_tables["frag"], tmp_path / "frag")
    before = d.rows_spark(spark, path)
    deleted_version: list[int] = []

    def delete():
        DeltaTable(str(path)).delete("id < 3")  # ids 0-4: the first small file of ('plain', 1, 2026-10-01)
        deleted_version.append(d.current_version(path))

    log_before = set(os.listdir(path / "_delta_log"))
    data_before = {p for p in d.listing(path) if not p.startswith("_delta_log/")}
    run = lambda: compact(con, path, small_file_threshold_mb=d.SMALL_MB, target_file_size_mb=TARGET_MB)  # noqa: E731
    outcome = while_paused(run, delete, path, monkeypatch)
    assert outcome["paused"] and "commit conflict" in outcome.get("error", ""), outcome
    assert d.current_version(path) == deleted_version[0], "no commit after the delete"
    delete_adds = {os.path.relpath(d._abs(path, a["add"]["path"]), path)
                   for a in d.commit_actions(path, deleted_version[0]) if "add" in a}
    assert {p for p in d.listing(path) if not p.startswith("_delta_log/")} == data_before | delete_adds
    assert set(os.listdir(path / "_delta_log")) == log_before | {f"{deleted_version[0]:020d}.json"}
    expected = d.rows_deltalake(path)
    assert len(expected) == len(before) - 3
    for reader, rows in d.rows_everywhere(spark, dcon, path).items():
        assert rows == expected, reader


# --------------------------------------------------------------------------- vacuum


def vacuum_paths(rows: list[dict]) -> set[str]:
    return {r["path"] for r in rows}


def companions_of(paths: set[str]) -> set[str]:
    """Hadoop's ``.<name>.crc`` checksum beside each file (deleting a file may delete it too)."""
    return {os.path.join(os.path.dirname(p), f".{os.path.basename(p)}.crc") for p in paths}


def removed_paths(path: Path) -> set[str]:
    """Every path a remove action names (any version)."""
    return {d._abs(path, a["remove"]["path"]) for v in d.commit_versions(path) for a in d.commit_actions(path, v) if "remove" in a}


def check_vacuum_rows(rows: list[dict], path: Path, scenario: d.VacuumScenario, dry_run: bool) -> None:
    removed = removed_paths(path)
    for row in rows:
        p = row["path"]
        assert os.path.isabs(p), row
        if dry_run:
            st = os.stat(p)
            assert row["size_bytes"] == st.st_size, row
            assert abs((utc(row["modified_at"]) - dt.datetime.fromtimestamp(st.st_mtime, dt.timezone.utc).replace(tzinfo=None)).total_seconds()) < 1.5, row
        if p in removed:
            assert row["reason"] == "tombstone", row
        elif p in scenario.planted_paths("untracked", "young"):
            assert row["reason"] == "untracked", row
        else:
            assert row["reason"] in ("tombstone", "untracked"), row  # deletion-vector files
        assert row["action"] == ("would delete" if dry_run else "deleted"), row
        assert row["dry_run"] is dry_run


SCENARIOS = {
    # name: (source table, commits whose removes are backdated, partition directory to plant in)
    "tomb": ("tomb", [6, 8], "s=a"),
    "sdv": ("sdv", [6, 9], "part=a"),
    "sfrag": ("sfrag", [], "region=eu/day=2026-10-01"),
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_vacuum_equals_sparks(con, dcon, spark, dl_tables, sp_tables, tmp_path, name):
    """Aged tables (expired and unexpired tombstones, deletion vectors live, tombstoned and
    expired, old and young untracked files, hidden names at the top and below it, _change_data,
    a stray file in _delta_log): our list is Spark's VACUUM DRY RUN list on a twin; the dry run
    (the default) deletes nothing; the real run deletes exactly those files, as Spark's own
    VACUUM does on another twin; every reader returns the same rows after."""
    table, expired, pdir = SCENARIOS[name]
    path = d.twin(source(table, dl_tables, sp_tables), tmp_path / name)
    scenario = d.age_vacuum_scenario(path, expired, pdir)
    spark_twin = d.twin(path, tmp_path / f"{name}-spark")
    expected = {p.replace(str(spark_twin), str(path), 1) for p in d.vacuum_spark(spark, spark_twin, RETENTION_H)}
    assert scenario.planted_paths("untracked") <= expected and not expected & scenario.planted_paths("young", "hidden", "hidden below", "log")

    listing = d.listing(path)
    rows = vacuum(con, path)  # defaults: 168 hours, a dry run
    assert vacuum_paths(rows) == expected
    check_vacuum_rows(rows, path, scenario, dry_run=True)
    assert d.listing(path) == listing, "a dry run deletes nothing"
    before = d.rows_spark(spark, path)

    done = vacuum(con, path, retention_hours=RETENTION_H, dry_run=False)
    assert vacuum_paths(done) == expected
    check_vacuum_rows(done, path, scenario, dry_run=False)
    assert not any(os.path.exists(p) for p in expected)
    # Spark's own VACUUM on its twin leaves the same data files (Hadoop also drops a deleted
    # file's .crc companion: companions of deleted files may go or stay; either side may log the
    # vacuum in _delta_log).
    spark.sql(f"VACUUM delta.`{spark_twin}` RETAIN {RETENTION_H} HOURS").collect()
    companions = companions_of(expected)
    ours_left = {p for p in d.listing(path) if str(path / p) not in companions and not p.startswith("_delta_log/")}
    theirs_left = {p for p in d.listing(spark_twin) if str(path / p) not in companions and not p.startswith("_delta_log/")}
    assert ours_left == theirs_left
    for reader, rows_after in d.rows_everywhere(spark, dcon, path).items():
        assert rows_after == before, reader
    assert d.vacuum_spark(spark, path, RETENTION_H) == set(), "Spark finds nothing left to vacuum"
    assert vacuum(con, path) == []


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_lite_vacuum_equals_sparks(con, spark, dl_tables, sp_tables, tmp_path, name):
    """VACUUM LITE on the aged tables, their commits aged too (LITE goes by the log): our list is
    Spark's `VACUUM … LITE DRY RUN` on a twin — expired tombstones only, no untracked file — and
    the real run deletes exactly those; Spark reads the same rows after."""
    table, expired, pdir = SCENARIOS[name]
    path = d.twin(source(table, dl_tables, sp_tables), tmp_path / name)
    scenario = d.age_vacuum_scenario(path, expired, pdir)
    old = dt.datetime.now().timestamp() - 30 * 86400
    for log_file in (path / "_delta_log").glob("*.json"):
        os.utime(log_file, (old, old))
    spark_twin = d.twin(path, tmp_path / f"{name}-spark")
    expected = {p.replace(str(spark_twin), str(path), 1) for p in d.vacuum_spark(spark, spark_twin, RETENTION_H, lite=True)}
    assert not expected & scenario.planted_paths("untracked", "young", "hidden", "hidden below", "log")
    assert bool(expected) == bool(expired), "LITE deletes the expired tombstones, and only those"
    rows = vacuum(con, path, mode="lite")
    assert vacuum_paths(rows) == expected
    assert all(r["reason"] == "tombstone" for r in rows), rows
    before = d.rows_spark(spark, path)
    done = vacuum(con, path, retention_hours=RETENTION_H, dry_run=False, mode="LITE")
    assert vacuum_paths(done) == expected and not any(os.path.exists(p) for p in expected)
    assert d.rows_spark(spark, path) == before
    assert "mode must be 'full' or 'lite'" in error_of(con, f"SELECT * FROM lakehouse_vacuum('{path}', mode := 'quick')")


def test_vacuum_equals_deltalakes_where_it_is_right(con, dl_tables, tmp_path):
    """A deltalake table without deletion vectors or hidden names below the top: our list is
    deltalake's full-mode dry run."""
    path = d.twin(dl_tables["tomb"], tmp_path / "tomb")
    d.age_vacuum_scenario(path, [6, 8], "s=a", kinds=("untracked", "young", "hidden", "log"))
    theirs_twin = d.twin(path, tmp_path / "theirs")
    expected = {p.replace(str(theirs_twin), str(path), 1) for p in d.vacuum_deltalake(theirs_twin, RETENTION_H)}
    assert expected
    assert vacuum_paths(vacuum(con, path, retention_hours=RETENTION_H)) == expected


def test_tombstones_expire_by_their_deletion_timestamp(con, spark, tmp_path):
    """DAT multi_partitioned: five files removed in 2022 (deletionTimestamp), on disk with fresh
    modification times (copied today). deltalake (full and lite) deletes them — the tombstone's
    age is its deletion timestamp; Spark also wants an old modification time and lists none: a
    documented difference, we follow deltalake and the protocol."""
    path = dat_copy("multi_partitioned", tmp_path)
    spark_twin = d.twin(path, tmp_path / "spark-twin")
    dl_twin = d.twin(path, tmp_path / "dl-twin")
    full = {p.replace(str(dl_twin), str(path), 1) for p in d.vacuum_deltalake(dl_twin, RETENTION_H)}
    lite = {p.replace(str(dl_twin), str(path), 1) for p in d.vacuum_deltalake(dl_twin, RETENTION_H, full=False)}
    assert len(full) == 5 and full == lite == removed_paths(path) - {f.path for f in d.files_spark(spark, path)}
    assert d.vacuum_spark(spark, spark_twin, RETENTION_H) == set(), "Spark keeps files modified within the retention"
    rows = vacuum(con, path)
    assert vacuum_paths(rows) == full and {r["reason"] for r in rows} == {"tombstone"}


def test_deltalake_full_vacuum_deletes_live_deletion_vectors(con, dcon, spark, sp_tables, tmp_path):
    """Peer bug (deltalake 1.6.6, full mode): deletion-vector files that live files (or unexpired
    tombstones) still reference are listed as untracked. Spark keeps them, so do we; after our
    real vacuum every reader still applies the vectors."""
    path = d.twin(sp_tables["sdv"], tmp_path / "sdv")
    d.age_vacuum_scenario(path, [6, 9], "part=a")
    live_dvs = d.dv_file_paths(path, [f for f in _spark_dv_descriptors(spark, path)])
    assert len(live_dvs) >= 2 and all(os.path.isfile(p) for p in live_dvs)
    dl_twin = d.twin(path, tmp_path / "dl-twin")
    deltalake_list = {p.replace(str(dl_twin), str(path), 1) for p in d.vacuum_deltalake(dl_twin, RETENTION_H)}
    assert live_dvs <= deltalake_list, "deltalake's full vacuum no longer lists live deletion vectors: update this test"
    spark_twin = d.twin(path, tmp_path / "spark-twin")
    assert not {p.replace(str(path), str(spark_twin), 1) for p in live_dvs} & d.vacuum_spark(spark, spark_twin, RETENTION_H)
    before = d.rows_spark(spark, path)
    rows = vacuum(con, path, dry_run=False)
    assert not vacuum_paths(rows) & live_dvs and all(os.path.isfile(p) for p in live_dvs)
    for reader, rows_after in d.rows_everywhere(spark, dcon, path).items():
        assert rows_after == before, reader


def _spark_dv_descriptors(spark, path: Path) -> list[dict]:
    """Deletion-vector descriptors of Spark's live files and unexpired tombstones."""
    snapshot = d.spark_snapshot(spark, path)
    out = []
    for dataset in (snapshot.allFiles().toDF(), snapshot.tombstones().toDF()):
        for row in d._spark_df(spark, dataset).select("deletionVector").collect():
            if row["deletionVector"] is not None:
                out.append(row["deletionVector"].asDict())
    return out


def test_deltalake_full_vacuum_ignores_hidden_names_below_the_top(con, spark, dl_tables, sp_tables, tmp_path):
    """Peer bug (deltalake 1.6.6, full mode): hidden names are checked on the first path
    component only, so ``s=a/_staging/…``, ``s=a/.hidden…`` and Hadoop's ``.part-….crc`` beside
    every file Spark wrote are listed. Spark and we keep them."""
    for name in ("tomb", "sfrag"):
        table, expired, pdir = SCENARIOS[name]
        path = d.twin(source(table, dl_tables, sp_tables), tmp_path / name)
        scenario = d.age_vacuum_scenario(path, expired, pdir)
        hidden_below = scenario.planted_paths("hidden below")
        if name == "sfrag":
            hidden_below |= {str(path / p) for p in d.listing(path) if os.path.basename(p).startswith(".part-") and "/" in p
                             and not p.startswith("_delta_log/")}
        dl_twin = d.twin(path, tmp_path / f"{name}-dl")
        deltalake_list = {p.replace(str(dl_twin), str(path), 1) for p in d.vacuum_deltalake(dl_twin, RETENTION_H)}
        # Below a directory whose name holds a '%' (Spark's `region=a%2Fb`) deltalake lists them
        # under the decoded name (`region=a/b/…`, a path that does not exist): another peer bug,
        # left out of the comparison.
        deltalake_list = {p for p in deltalake_list if os.path.exists(p)}
        plain = {p for p in hidden_below if "%" not in p}
        assert plain and plain <= deltalake_list, "deltalake's full vacuum now skips hidden names below the top: update this test"
        spark_twin = d.twin(path, tmp_path / f"{name}-spark")
        spark_list = {p.replace(str(spark_twin), str(path), 1) for p in d.vacuum_spark(spark, spark_twin, RETENTION_H)}
        assert not spark_list & hidden_below
        ours = vacuum_paths(vacuum(con, path))
        assert not ours & hidden_below and ours == deltalake_list - hidden_below


def test_vacuum_retention_check(con, spark, dl_tables, tmp_path):
    """Retention below delta.deletedFileRetentionDuration is refused, as Spark (check on) and
    deltalake (enforce_retention_duration) refuse it; enforce_retention_duration := false
    allows it, and the list at 0 hours is Spark's. A table whose retention is 1 hour accepts 1."""
    path = d.twin(dl_tables["tomb"], tmp_path / "tomb")
    scenario = d.age_vacuum_scenario(path, [6], "s=a", kinds=("untracked", "young", "hidden"))
    for hours in (0, 24, 167, 168, 200):
        refused_by_spark = d.spark_vacuum_refuses(spark, path, hours) is not None
        refused_by_deltalake = d.deltalake_vacuum_refuses(path, hours) is not None
        assert refused_by_spark == refused_by_deltalake == (hours < 168), hours
        sql = f"SELECT * FROM lakehouse_vacuum('{path}', retention_hours := {hours})"
        if hours < 168:
            message = error_of(con, sql)
            assert "lakehouse_vacuum" in message and "enforce_retention_duration" in message, message
        else:
            con.execute(sql).fetchall()
    spark_twin = d.twin(path, tmp_path / "spark-twin")
    expected = {p.replace(str(spark_twin), str(path), 1) for p in d.vacuum_spark(spark, spark_twin, 0)}
    assert scenario.planted_paths("young") <= expected
    rows = vacuum(con, path, retention_hours=0, enforce_retention_duration=False)
    assert vacuum_paths(rows) == expected

    DeltaTable(str(path)).alter.set_table_properties({"delta.deletedFileRetentionDuration": "interval 1 hours"})
    assert d.deltalake_vacuum_refuses(path, 1) is None and d.spark_vacuum_refuses(spark, path, 1) is None
    assert d.deltalake_vacuum_refuses(path, 0) is not None and d.spark_vacuum_refuses(spark, path, 0) is not None
    con.execute(f"SELECT * FROM lakehouse_vacuum('{path}', retention_hours := 1)").fetchall()
    assert "lakehouse_vacuum" in error_of(con, f"SELECT * FROM lakehouse_vacuum('{path}', retention_hours := 0)")


# --------------------------------------------------------------------------- the gate


def test_gate_on_a_delta_table(con, dcon, spark, dl_tables, tmp_path, monkeypatch):
    """The gate on an aged, fragmented deltalake table: a dry run changes nothing; the run
    compacts exactly the degraded partitions (the reference profile's), vacuums exactly what
    Spark's VACUUM dry run lists at the 7-day retention, and the table reads the same everywhere."""
    monkeypatch.delenv("SLACK_WEBHOOK_URL", raising=False)
    path = d.twin(dl_tables["tomb"], tmp_path / "tomb")
    d.age_vacuum_scenario(path, [6, 8], "s=a", kinds=("untracked", "young", "hidden", "hidden below", "log"))
    ref = d.expected_profile(d.files_spark(spark, path), d.SMALL_MB)
    degraded = expected_plan(ref)
    assert degraded == {"s=a", "s=b"}
    spark_twin = d.twin(path, tmp_path / "spark-twin")
    to_delete = {p.replace(str(spark_twin), str(path), 1) for p in d.vacuum_spark(spark, spark_twin, RETENTION_H)}
    sizes = {p: os.path.getsize(p) for p in to_delete}
    before = d.rows_everywhere(spark, dcon, path)
    assert all(rows == before["spark"] for rows in before.values())
    params = dict(small_file_threshold_mb=d.SMALL_MB, target_file_size_mb=TARGET_MB, snapshot_retention_days=7)

    listing = d.listing(path)
    planned = call(con, "lakehouse_gate", path, dry_run=True, **params)
    assert d.listing(path) == listing
    assert {r["status"] for r in planned} == {"dry run"}
    assert {r["partition"] for r in planned if r["verdict"] == "would compact"} == degraded

    version = d.current_version(path)
    rows = call(con, "lakehouse_gate", path, **params)
    assert {r["partition"] for r in rows} == set(ref)
    first = rows[0]
    assert first["status"] == "maintained" and first["notification"].startswith("not sent")
    assert first["partitions_compacted"] == 2 and {r["partition"] for r in rows if r["verdict"] == "compacted"} == degraded
    assert first["small_files_eliminated"] == sum(ref[p]["small_files"] for p in degraded) - 2
    assert first["files_deleted"] == len(to_delete) and first["bytes_reclaimed"] == sum(sizes.values())
    operations = [a["commitInfo"]["operation"] for v in range(version + 1, d.current_version(path) + 1)
                  for a in d.commit_actions(path, v) if "commitInfo" in a]
    # Partial progress (the gate's default): one OPTIMIZE per degraded partition.
    assert operations.count("OPTIMIZE") == 2 and set(operations) <= {"OPTIMIZE", "VACUUM START", "VACUUM END"}, operations
    assert not any(os.path.exists(p) for p in to_delete)
    gone = {str(path / p) for p in listing} - {str(path / p) for p in d.listing(path)}
    assert gone - companions_of(to_delete) == to_delete, "the gate deleted exactly what Spark's VACUUM would"
    ref_after = d.expected_profile(d.files_spark(spark, path), d.SMALL_MB)
    for r in rows:
        assert r["files_after"] == ref_after[r["partition"]]["total_files"], r
    for reader, rows_after in d.rows_everywhere(spark, dcon, path).items():
        assert rows_after == before["spark"], reader


# --------------------------------------------------------------------------- Iceberg-only functions


@pytest.mark.parametrize("function", ["lakehouse_expire_snapshots", "lakehouse_remove_orphan_files"])
def test_iceberg_maintenance_points_to_vacuum(con, dl_tables, tmp_path, function):
    path = d.twin(dl_tables["tomb"], tmp_path / "tomb")
    listing = d.listing(path)
    message = error_of(con, f"SELECT * FROM {function}('{path}', dry_run := false)")
    assert function in message and "lakehouse_vacuum" in message, message
    assert d.listing(path) == listing
