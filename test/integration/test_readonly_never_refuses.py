"""The read-only functions never refuse a table they can read (issue 51, item 1).

`lakehouse_fragmentation`, `lakehouse_fragmentation_summary` and `lakehouse_metadata_health`
profile every table whose log or metadata parses; a feature that blocks a maintenance action is
reported in `compaction_blocked_by` / `cleanup_blocked_by` (NULL when nothing blocks), in the
words the action's own refusal uses, while `lakehouse_compact` and `lakehouse_vacuum` still
refuse such a table, naming the feature, and leave it untouched.

- Delta: `variantType-preview` + `variantShredding-preview` (reader and writer features; before,
  even the health failed: "uses reader feature … whose files this vacuum does not know"; since
  issue 51 item 2 compaction takes variant tables, stitching their files, and VACUUM knows both,
  so nothing is blocked), and `liquid` as an older table's writer feature (no such feature exists: clustering's
  is `clustering`; it stays unknown, named by both refusals). (`collations`, once refused as
  unknown, is maintained now: test_delta_collations.py.) Each table
  is written by deltalake, then its protocol upgraded by a commit listing the features, as a
  writer that knows them would.
- Iceberg: nanosecond timestamps (format v3), and a type v3 does not define yet (read with a
  stand-in, as `variant` is). pyiceberg 0.12 writes no v3 and refuses ns
  timestamps below it, so the table is written by pyiceberg as v2 with microsecond timestamps
  and a v3 metadata file with `timestamp_ns` / `timestamptz_ns` columns is written beside it.
  iceberg-rust 0.10.1 parses both types; compaction refuses `timestamptz_ns` only (DuckDB would
  drop its nanoseconds). A v3 file without `next-row-id` (required by the spec, Java and
  iceberg-rust) is an error naming the field — before, serde's "data did not match any variant of
  untagged enum TableMetadataEnum".
"""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
from deltalake import write_deltalake
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, TimestampType, TimestamptzType

import delta_tables as d

def rows_of(con: duckdb.DuckDBPyConnection, sql: str) -> list[dict]:
    cursor = con.execute(sql)
    names = [c[0] for c in cursor.description]
    return [dict(zip(names, r)) for r in cursor.fetchall()]


def snapshot_of(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``root``: its size and modification time (what a refusal must keep)."""
    out = {}
    for dirpath, _, names in os.walk(root):
        for name in names:
            st = (Path(dirpath) / name).stat()
            out[str(Path(dirpath) / name)] = (st.st_size, st.st_mtime_ns)
    return out


def delta_with_features(root: Path, reader: int, readers: list[str] | None, writers: list[str]) -> Path:
    """A partitioned deltalake table of four small appends (two partitions), its protocol then
    upgraded by a commit listing ``readers``/``writers``; files aged past every retention, and
    one untracked file a VACUUM would delete."""
    for b in range(4):
        rows = [{"id": b * 10 + i, "p": "a" if i % 2 else "b"} for i in range(6)]
        write_deltalake(str(root), pa.Table.from_pylist(rows), mode="append", partition_by=["p"])
    protocol: dict = {"minReaderVersion": reader, "minWriterVersion": 7, "writerFeatures": writers}
    if readers is not None:
        protocol["readerFeatures"] = readers
    (root / "_delta_log" / f"{4:020}.json").write_text(
        json.dumps({"commitInfo": {"operation": "UPGRADE PROTOCOL"}}) + "\n" + json.dumps({"protocol": protocol}) + "\n")
    d.age_files(root)
    stray = root / "p=a" / "stray.parquet"
    stray.write_bytes(b"x")
    os.utime(stray, (0, 0))
    return root


DELTA_CASES = {
    # name: (reader version, reader features, writer features, compaction's text, vacuum's text)
    "liquid": (
        1,
        None,
        ["appendOnly", "invariants", "liquid"],
        "uses writer feature 'liquid' (not known to this version)",
        "uses writer feature 'liquid', whose files this vacuum does not know",
    ),
}


@pytest.mark.parametrize("case", list(DELTA_CASES))
def test_a_delta_feature_is_a_column_of_the_read_only_functions(con, tmp_path, case):
    reader, readers, writers, compaction_why, vacuum_why = DELTA_CASES[case]
    root = delta_with_features(tmp_path / case, reader, readers, writers)
    profile = rows_of(con, f"SELECT * FROM lakehouse_fragmentation('{root}', small_file_threshold_mb := 1)")
    assert sorted(r["partition"] for r in profile) == ["p=a", "p=b"], profile
    assert all(r["total_files"] == 4 and r["requires_compaction"] for r in profile), profile
    assert {(r["compaction_blocked_by"], r["cleanup_blocked_by"]) for r in profile} == {(compaction_why, vacuum_why)}
    [summary] = rows_of(con, f"SELECT * FROM lakehouse_fragmentation_summary('{root}', small_file_threshold_mb := 1)")
    assert summary["total_lakehouse_files"] == 8 and summary["fragmented_partition_count"] == 2, summary
    assert (summary["compaction_blocked_by"], summary["cleanup_blocked_by"]) == (compaction_why, vacuum_why)
    [health] = rows_of(con, f"SELECT * FROM lakehouse_metadata_health('{root}')")
    assert health["format"] == "delta" and health["snapshots"] == 5 and health["data_files"] == 8, health
    assert (health["compaction_blocked_by"], health["cleanup_blocked_by"]) == (compaction_why, vacuum_why)
    # What VACUUM would delete is not planned on a table it does not know: unknown, not 0.
    assert health["orphan_files"] is None and health["orphan_bytes"] is None, health
    assert health["delta_log"]["vacuumable_files"] is None and health["delta_log"]["tombstones"] == 0, health

    before = snapshot_of(root)
    if compaction_why is not None:
        with pytest.raises(duckdb.Error, match="compaction does not rewrite it") as refused:
            con.execute(f"SELECT * FROM lakehouse_compact('{root}', small_file_threshold_mb := 1, dry_run := false)").fetchall()
        assert compaction_why in str(refused.value)
    with pytest.raises(duckdb.Error, match="nothing vacuumed") as refused:
        con.execute(f"SELECT * FROM lakehouse_vacuum('{root}', dry_run := false)").fetchall()
    assert vacuum_why in str(refused.value)
    assert snapshot_of(root) == before, "a refusal leaves the table as it was"


def test_the_gate_on_a_table_it_cannot_maintain_reports_why_and_changes_nothing(con, tmp_path):
    """The gate on a table both compaction and VACUUM refuse (an unknown writer feature) runs to
    its end: every degraded partition is skipped with the compaction's reason, VACUUM is not run
    and the warnings say why, and no file of the table changes (before, the gate failed on
    VACUUM's refusal)."""
    reader, readers, writers, compaction_why, vacuum_why = DELTA_CASES["liquid"]
    root = delta_with_features(tmp_path / "gate", reader, readers, writers)
    before = snapshot_of(root)
    rows = rows_of(con, f"SELECT * FROM lakehouse_gate('{root}', small_file_threshold_mb := 1)")
    assert sorted(r["partition"] for r in rows) == ["p=a", "p=b"], rows
    assert {(r["verdict"], r["files_after"]) for r in rows} == {("skipped", 4)}, rows
    assert all(compaction_why in r["reason"] for r in rows), rows
    first = rows[0]
    assert first["partitions_compacted"] == 0 and first["files_deleted"] == 0, first
    assert f"VACUUM was not run: the Delta table {vacuum_why}" in first["warnings"], first
    assert snapshot_of(root) == before, "the gate leaves a table it cannot maintain as it was"


@pytest.mark.parametrize("features", [["variantType-preview"], ["variantType-preview", "variantShredding-preview"]])
def test_a_delta_variant_table_blocks_nothing(con, tmp_path, features):
    """`variantType-preview`, with or without `variantShredding-preview`: VACUUM knows them (their
    files are the log's; shredding only lays out a file's variant columns), so the health plans
    the vacuum as usual, and compaction takes them (variant columns are stitched)."""
    root = delta_with_features(tmp_path / "variant", 3, features, features + ["appendOnly"])
    [health] = rows_of(con, f"SELECT * FROM lakehouse_metadata_health('{root}')")
    assert health["compaction_blocked_by"] is None, health
    assert health["cleanup_blocked_by"] is None, health
    assert health["orphan_files"] == 1 and health["delta_log"]["vacuumable_files"] == 1, health


def test_a_plain_delta_table_blocks_nothing(con, tmp_path):
    root = tmp_path / "plain"
    for b in range(2):
        write_deltalake(str(root), pa.table({"id": pa.array([b], pa.int64())}), mode="append")
    [row] = rows_of(con, f"SELECT compaction_blocked_by, cleanup_blocked_by FROM lakehouse_metadata_health('{root}')")
    assert row == {"compaction_blocked_by": None, "cleanup_blocked_by": None}


# --------------------------------------------------------------------------- Iceberg, ns timestamps


def iceberg_ns_table(tmp_path: Path, tz: bool, next_row_id: bool = True, id_type: str = "long") -> tuple[Path, Path]:
    """A pyiceberg v2 table of three appends (id, ts, tstz), and a v3 metadata file written after
    its current one whose `ts` is `timestamp_ns` and, when ``tz``, `tstz` is `timestamptz_ns`
    (the data files keep pyiceberg's microseconds: the profile reads no row), and `id` is of
    ``id_type``. Returns the table directory and the v3 metadata file."""
    catalog = SqlCatalog("default", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=f"file://{tmp_path}")
    catalog.create_namespace("ns")
    schema = Schema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(2, "ts", TimestampType(), required=False),
        NestedField(3, "tstz", TimestamptzType(), required=False),
    )
    table = catalog.create_table("ns.nanos", schema=schema)
    when = dt.datetime(2026, 1, 1, 0, 0, 0, 123456)
    for b in range(3):
        table.append(pa.table({
            "id": pa.array([b], pa.int64()),
            "ts": pa.array([when], pa.timestamp("us")),
            "tstz": pa.array([when.replace(tzinfo=dt.timezone.utc)], pa.timestamp("us", tz="UTC")),
        }))
    current = Path(table.metadata_location.removeprefix("file://"))
    metadata = json.loads(current.read_text())
    metadata["format-version"] = 3
    if next_row_id:
        metadata["next-row-id"] = 0
    for s in metadata["schemas"]:
        for field in s["fields"]:
            if field["name"] == "id":
                field["type"] = id_type
            if field["name"] == "ts":
                field["type"] = "timestamp_ns"
            if field["name"] == "tstz" and tz:
                field["type"] = "timestamptz_ns"
    v3 = current.parent / "99999-v3-nanos.metadata.json"
    v3.write_text(json.dumps(metadata))
    return current.parent.parent, v3


def test_nanosecond_timestamps_are_profiled_and_timestamptz_ns_blocks_compaction(con, tmp_path):
    table, metadata = iceberg_ns_table(tmp_path, tz=True)
    profile = rows_of(con, f"SELECT * FROM lakehouse_fragmentation('{metadata}', small_file_threshold_mb := 1)")
    assert [(r["partition"], r["total_files"], r["record_count"]) for r in profile] == [("(unpartitioned)", 3, 3)]
    why = profile[0]["compaction_blocked_by"]
    assert why is not None and "'tstz' of type timestamptz_ns" in why and profile[0]["cleanup_blocked_by"] is None
    [summary] = rows_of(con, f"SELECT * FROM lakehouse_fragmentation_summary('{metadata}', small_file_threshold_mb := 1)")
    assert summary["total_lakehouse_files"] == 3 and summary["compaction_blocked_by"] == why, summary
    [health] = rows_of(con, f"SELECT * FROM lakehouse_metadata_health('{metadata}')")
    assert health["format"] == "iceberg" and health["snapshots"] == 3 and health["data_files"] == 3, health
    assert (health["compaction_blocked_by"], health["cleanup_blocked_by"]) == (why, None)
    before = snapshot_of(table)
    with pytest.raises(duckdb.Error) as refused:
        con.execute(f"SELECT * FROM lakehouse_compact('{metadata}', small_file_threshold_mb := 1, dry_run := false)").fetchall()
    assert why in str(refused.value)
    assert snapshot_of(table) == before


def test_timestamp_ns_alone_blocks_nothing(con, tmp_path):
    _, metadata = iceberg_ns_table(tmp_path, tz=False)
    [row] = rows_of(con, f"SELECT total_lakehouse_files, compaction_blocked_by, cleanup_blocked_by "
                         f"FROM lakehouse_fragmentation_summary('{metadata}')")
    assert row == {"total_lakehouse_files": 3, "compaction_blocked_by": None, "cleanup_blocked_by": None}


def test_a_v3_file_without_next_row_id_names_the_field(con, tmp_path):
    _, metadata = iceberg_ns_table(tmp_path, tz=True, next_row_id=False)
    with pytest.raises(duckdb.Error, match="the required field 'next-row-id' is missing") as refused:
        con.execute(f"SELECT * FROM lakehouse_fragmentation('{metadata}')").fetchall()
    assert "untagged enum" not in str(refused.value)


def test_a_type_v3_does_not_define_yet_is_profiled_and_blocks_compaction(con, tmp_path):
    """A v3 table with a column type this version does not know (a later v3 addition) is read
    with a stand-in: profiled, its compaction blocked naming the column and its type."""
    table, metadata = iceberg_ns_table(tmp_path, tz=False, id_type="uuid7")
    [row] = rows_of(con, f"SELECT total_files, compaction_blocked_by, cleanup_blocked_by "
                         f"FROM lakehouse_fragmentation('{metadata}')")
    assert row == {"total_files": 3, "cleanup_blocked_by": None,
                   "compaction_blocked_by": "compaction cannot rewrite columns of type 'id' (uuid7)"}
    [health] = rows_of(con, f"SELECT snapshots, compaction_blocked_by FROM lakehouse_metadata_health('{metadata}')")
    assert health == {"snapshots": 3, "compaction_blocked_by": row["compaction_blocked_by"]}
    before = snapshot_of(table)
    with pytest.raises(duckdb.Error, match="compaction cannot rewrite columns of type 'id' \\(uuid7\\)"):
        con.execute(f"SELECT * FROM lakehouse_compact('{metadata}', small_file_threshold_mb := 1, dry_run := false)").fetchall()
    assert snapshot_of(table) == before
