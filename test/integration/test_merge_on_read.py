"""Merge-on-read compaction and manifest rewrite (issue 15).

The tables here are built by pyiceberg's snapshot producer committing delete files laid out as the
spec says (sequence numbers chosen per test), and read back by DuckDB's iceberg extension, which
applies position and equality deletes, and pyiceberg where it can (0.12 cannot read equality
deletes). Spark cannot read them (its reader rejects pyiceberg's long-typed equality_ids in the
delete manifest): Spark-written merge-on-read tables are compacted and read back by Spark in
test_spark_conformance, and Flink/Hive/Impala/Java ones in test_foreign_tables.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from pyiceberg.typedef import Record

import conftest as c
from test_compact_iceberg import compact, duckdb_rows, pyiceberg_rows
from test_foreign_tables import as_dicts

SMALL = {"small_file_threshold_mb": 1.0, "target_file_size_mb": 8.0}


def _day(d: int) -> int:
    return (dt.date(2026, 10, d) - dt.date(1970, 1, 1)).days


def build_merge_on_read(catalog):
    """identity(event_date), 6 small files on each of 2026-10-01 and -02 and a big one on -03.
    Then: a position delete of rows 0-2 of one 10-01 file; an equality delete of ids 11 and 13
    on 10-02 (seq 14); an append to 10-02 re-inserting id 11 (seq 15: the delete is older, so the
    new row stays); a global-free partitioned layout, all by pyiceberg."""
    table = c.build_identity_date(catalog)
    day1 = sorted((f for f in c.live_data_files(table) if f.partition[0] == _day(1)), key=lambda f: f.file_path)
    table = c.commit_files(table, [c.position_delete_file(table, day1[0], [0, 1, 2])], deletes=True)
    table = c.commit_files(table, [c.equality_delete_file(table, Record(_day(2)), "id", [11, 13])], deletes=True)
    table.append(c._date_rows([11, 999], dt.date(2026, 10, 2)))
    return catalog.load_table(f"{c.NAMESPACE}.by_date")


def live_delete_files(table) -> list[dict]:
    return [f for f in table.inspect.files().to_pylist() if f["content"] != 0]


def test_deletes_are_applied_and_dangling_ones_removed(con, iceberg_con, catalog):
    table = build_merge_on_read(catalog)
    metadata = table.metadata_location
    before = duckdb_rows(iceberg_con, metadata)
    ids = [r[1] for r in before]  # columns sorted by name: event_date, id, payload
    assert 11 in ids and 13 not in ids and ids.count(11) == 1, "DuckDB applies both deletes, by sequence number"
    assert len(live_delete_files(table)) == 2

    result = compact(con, f"{c.NAMESPACE}.by_date", catalog_uri=catalog.test_uri, **SMALL)
    by_partition = {r["partition"]: r for r in result}
    for day in ("2026-10-01", "2026-10-02"):
        row = by_partition[f"partition_date={day}"]
        assert row["verdict"] == "compacted", row
        assert row["delete_files"] == 1 and row["delete_files_removed"] == 1, row
        assert row["reason"].endswith(", applying 1 delete files"), row

    table = catalog.load_table(f"{c.NAMESPACE}.by_date")
    assert duckdb_rows(iceberg_con, table.metadata_location) == before, "a deleted row came back or a row was lost"
    # pyiceberg reads it now: no delete file is left.
    assert pyiceberg_rows(table) == before
    assert live_delete_files(table) == []
    summary = table.metadata.current_snapshot().summary
    assert summary.operation.value == "replace"
    assert summary["removed-delete-files"] == "2"
    assert summary["removed-position-deletes"] == "3" and summary["removed-equality-deletes"] == "2"
    # The rewritten files hold the rows a reader sees: 3 + 1 fewer rows than the manifests listed.
    records = sum(f["record_count"] for f in table.inspect.files().to_pylist())
    assert records == len(before)


@pytest.mark.parametrize("sort_order", ["id DESC", "zorder(id, payload)"])
def test_sorted_rewrite_applies_deletes_across_its_files(con, iceberg_con, catalog, sort_order):
    """A sorted partition is rewritten as a whole into several files: 24 appends of 5,000 rows
    on one day (ids interleaved across files), a position delete on one file, an equality delete
    of ids in others. The deletes stay applied, no row is lost or comes back, dangling deletes
    go, and the rows of each new file follow the order."""
    table = catalog.create_table(f"{c.NAMESPACE}.sorted_mor", schema=c._DATE_SCHEMA, partition_spec=c._DATE_SPEC)
    for k in range(24):
        table.append(c._date_rows(range(k, 120_000, 24), dt.date(2026, 10, 1)))
    first = sorted(c.live_data_files(table), key=lambda f: f.file_path)[0]
    # Every file small, the target three files' size: whatever the rewrite's output ratio
    # (0.2-1), round(24 * ratio / 3) is 2 to 8 groups of at least 3 files.
    small_mb = (max(f.file_size_in_bytes for f in c.live_data_files(table)) + 1) / (1024 * 1024)
    table = c.commit_files(table, [c.position_delete_file(table, first, [0, 1, 2, 500])], deletes=True)
    table = c.commit_files(table, [c.equality_delete_file(table, Record(_day(1)), "id", [7, 13, 119_999])], deletes=True)
    before = duckdb_rows(iceberg_con, table.metadata_location)
    import pyarrow.parquet as pq

    named = pq.read_table(first.file_path.removeprefix("file://"), columns=["id"]).column("id").to_pylist()
    deleted = {named[p] for p in (0, 1, 2, 500)} | {7, 13, 119_999}
    assert sorted(r[1] for r in before) == sorted(set(range(120_000)) - deleted), "DuckDB applies both deletes"
    result = compact(
        con, f"{c.NAMESPACE}.sorted_mor", catalog_uri=catalog.test_uri,
        small_file_threshold_mb=small_mb, target_file_size_mb=3 * small_mb, sort_order=sort_order,
    )
    compacted = [r for r in result if r["verdict"] == "compacted"]
    assert len(compacted) == 1, result
    (row,) = compacted
    assert row["output_files"] >= 2 and row["delete_files_removed"] == 2, row
    table = catalog.load_table(f"{c.NAMESPACE}.sorted_mor")
    assert duckdb_rows(iceberg_con, table.metadata_location) == before, "a deleted row came back or a row was lost"
    assert pyiceberg_rows(table) == before
    files = table.inspect.files().to_pylist()
    assert live_delete_files(table) == [] and len(files) == row["output_files"]
    assert sum(f["record_count"] for f in files) == len(before)
    if sort_order == "id DESC":
        runs = [pq.read_table(f["file_path"].removeprefix("file://"), columns=["id"]).column("id").to_pylist() for f in files]
        for ids in runs:
            assert ids == sorted(ids, reverse=True)
        # Disjoint, consecutive runs of the order across the files.
        runs.sort(key=lambda ids: -ids[0])
        assert all(a[-1] > b[0] for a, b in zip(runs, runs[1:]))


def test_sorted_rewrite_of_a_table_with_a_rowid_column(con, iceberg_con, catalog):
    """A column named like DuckDB's row id pseudo-column does not shadow how a sorted rewrite
    cuts its files (each row lands in exactly one file, by its position in the order)."""
    import pyarrow as pa
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField, StringType

    schema = Schema(NestedField(1, "rowid", LongType(), required=False), NestedField(2, "v", StringType(), required=False))
    table = catalog.create_table(f"{c.NAMESPACE}.with_rowid", schema=schema)
    for k in range(24):
        ids = list(range(k * 1000 + 500, k * 1000 + 1500))  # not 0..n-1
        table.append(pa.table({"rowid": pa.array(ids, pa.int64()), "v": [f"v{(i * 7919) % 10007:05d}" for i in ids]}))
    before = duckdb_rows(iceberg_con, table.metadata_location)
    small_mb = (max(f.file_size_in_bytes for f in c.live_data_files(table)) + 1) / (1024 * 1024)
    result = compact(con, f"{c.NAMESPACE}.with_rowid", catalog_uri=catalog.test_uri,
                     small_file_threshold_mb=small_mb, target_file_size_mb=3 * small_mb, sort_order="v")
    (row,) = [r for r in result if r["verdict"] == "compacted"]
    assert row["output_files"] >= 2, row
    table = catalog.load_table(f"{c.NAMESPACE}.with_rowid")
    assert duckdb_rows(iceberg_con, table.metadata_location) == before
    assert pyiceberg_rows(table) == before


def test_apply_deletes_false_keeps_the_skip(con, iceberg_con, catalog):
    table = build_merge_on_read(catalog)
    location = table.metadata_location
    result = compact(con, f"{c.NAMESPACE}.by_date", catalog_uri=catalog.test_uri, apply_deletes=False, **SMALL)
    skipped = {r["partition"]: r["reason"] for r in result if r["reason"].startswith("skipped: has")}
    assert skipped == {
        "partition_date=2026-10-01": "skipped: has 1 delete files",
        "partition_date=2026-10-02": "skipped: has 1 delete files",
    }, result
    assert all(r["delete_files_removed"] == 0 for r in result)
    table = catalog.load_table(f"{c.NAMESPACE}.by_date")
    assert table.metadata_location == location, "nothing to compact: no commit"


def test_dry_run_plans_the_deletes_and_changes_nothing(con, iceberg_con, catalog):
    table = build_merge_on_read(catalog)
    root = Path(c.local_path(table.location()))
    listing = sorted(str(p) for p in root.rglob("*"))
    result = compact(con, f"{c.NAMESPACE}.by_date", catalog_uri=catalog.test_uri, dry_run=True, **SMALL)
    planned = [r for r in result if r["verdict"] == "would compact"]
    assert len(planned) >= 2 and all(r["snapshot_id"] is None for r in result), result
    assert catalog.load_table(f"{c.NAMESPACE}.by_date").metadata_location == table.metadata_location
    assert sorted(str(p) for p in root.rglob("*")) == listing


def test_a_delete_still_applying_to_a_file_not_rewritten_is_kept(con, iceberg_con, catalog):
    """An equality delete on 10-02 also applies to a big 10-02 file that is not rewritten: it must
    stay live (and keep deleting that file's row)."""
    table = build_merge_on_read(catalog)
    big = c._date_rows(range(50_000, 50_000 + 60_000), dt.date(2026, 10, 2))
    big_file = c.data_file(table, big, (_day(2),), "big")
    table = c.commit_files(table, [big_file])
    table = c.commit_files(table, [c.equality_delete_file(table, Record(_day(2)), "id", [50_001])], deletes=True)
    before = duckdb_rows(iceberg_con, table.metadata_location)
    assert 50_001 not in {r[1] for r in before}
    compact(con, f"{c.NAMESPACE}.by_date", catalog_uri=catalog.test_uri, small_file_threshold_mb=0.5, target_file_size_mb=8.0)
    table = catalog.load_table(f"{c.NAMESPACE}.by_date")
    assert duckdb_rows(iceberg_con, table.metadata_location) == before
    kept = live_delete_files(table)
    assert len(kept) == 1 and kept[0]["equality_ids"] == [1], kept


# --------------------------------------------------------------------------- manifests


def entries(table) -> list[tuple]:
    """(path, data seq, file seq, adding snapshot) of every live entry, as pyiceberg reads them."""
    return sorted(
        (e.data_file.file_path, e.sequence_number, e.file_sequence_number, e.snapshot_id)
        for m in table.current_snapshot().manifests(table.io)
        for e in m.fetch_manifest_entry(table.io, discard_deleted=True)
    )


def rewrite_manifests(con, table: str, **params) -> list[dict]:
    args = "".join(f", {k} := {v!r}" if not isinstance(v, bool) else f", {k} := {str(v).lower()}" for k, v in params.items())
    return as_dicts(con.execute(f"SELECT * FROM lakehouse_rewrite_manifests('{table}'{args})"))


def test_manifest_rewrite_merges_small_manifests_and_keeps_every_entry(con, iceberg_con, catalog):
    table = build_merge_on_read(catalog)
    before_entries = entries(table)
    before = duckdb_rows(iceberg_con, table.metadata_location)
    manifests_before = len(table.current_snapshot().manifests(table.io))
    result = rewrite_manifests(con, f"{c.NAMESPACE}.by_date", catalog_uri=catalog.test_uri)
    by_content = {r["content"]: r for r in result}
    assert by_content["data"]["action"] == "merged" and by_content["data"]["manifests_after"] == 1, result
    assert by_content["deletes"]["action"] == "merged" and by_content["deletes"]["manifests_after"] == 1, result
    table = catalog.load_table(f"{c.NAMESPACE}.by_date")
    assert len(table.current_snapshot().manifests(table.io)) == 2 < manifests_before
    assert table.metadata.current_snapshot().summary.operation.value == "replace"
    # Same entries, same sequence numbers and adding snapshots: the equality delete (seq 14) still
    # deletes id 11 of 10-02's older files and not the id 11 appended after it.
    assert entries(table) == before_entries
    assert duckdb_rows(iceberg_con, table.metadata_location) == before


def test_manifest_rewrite_dry_run_and_bad_input(con, catalog, tmp_path):
    table = c.build_identity_date(catalog)
    location = table.metadata_location
    plan = rewrite_manifests(con, f"{c.NAMESPACE}.by_date", catalog_uri=catalog.test_uri, dry_run=True)
    assert [(r["content"], r["action"], r["manifests_before"], r["manifests_after"]) for r in plan] == [
        ("data", "would merge", 13, 1)
    ]
    assert catalog.load_table(f"{c.NAMESPACE}.by_date").metadata_location == location
    with pytest.raises(Exception, match="lakehouse_rewrite_manifests: target_manifest_size_mb must be in"):
        rewrite_manifests(con, f"{c.NAMESPACE}.by_date", catalog_uri=catalog.test_uri, target_manifest_size_mb=-1.0)
    with pytest.raises(Exception, match="lakehouse_rewrite_manifests: table path .* does not exist"):
        rewrite_manifests(con, str(tmp_path / "nope"))
    # Nothing small enough to merge: kept, no commit.
    tiny = rewrite_manifests(con, f"{c.NAMESPACE}.by_date", catalog_uri=catalog.test_uri, target_manifest_size_mb=0.001)
    assert all(r["action"] == "kept" and r["snapshot_id"] is None for r in tiny), tiny


def test_gate_merges_bloated_manifests(con, iceberg_con, catalog):
    """Bloated: at least commit.manifest.min-count-to-merge manifests (Iceberg's default 100;
    3 here), mostly small, after the compaction (which leaves 3 of the 13: its new file's, one
    listing the 12 it emptied, 10-03's). Below that count the gate leaves manifests alone
    (test_gate's optimal table has 13)."""
    table = c.build_identity_date(catalog)
    with table.transaction() as tx:
        tx.set_properties({"commit.manifest.min-count-to-merge": "3"})
    table = catalog.load_table(f"{c.NAMESPACE}.by_date")
    before = duckdb_rows(iceberg_con, table.metadata_location)
    rows = as_dicts(con.execute(
        f"SELECT * FROM lakehouse_gate('{c.NAMESPACE}.by_date', catalog_uri := '{catalog.test_uri}', "
        "small_file_threshold_mb := 1, target_file_size_mb := 8, snapshot_retention_days := 30)"
    ))
    assert rows[0]["manifests_merged"] >= 2 and rows[0]["manifest_snapshot_id"] is not None, rows
    table = catalog.load_table(f"{c.NAMESPACE}.by_date")
    assert table.metadata.current_snapshot().snapshot_id == rows[0]["manifest_snapshot_id"]
    assert len(table.current_snapshot().manifests(table.io)) == 1
    assert duckdb_rows(iceberg_con, table.metadata_location) == before


def test_manifest_rewrite_writes_one_manifest_per_bin_of_the_target(con, iceberg_con, catalog):
    """Small manifests merge in bins of about the target (one manifest written per bin, so a merge
    of a million entries holds one bin at a time): below a target a few manifests large, the 13
    manifests become several, none over the target by more than one input manifest, each
    clustered by partition, with every entry's sequence numbers and adding snapshot kept."""
    table = c.build_identity_date(catalog)
    before_entries = entries(table)
    before = duckdb_rows(iceberg_con, table.metadata_location)
    lengths = [m.manifest_length for m in table.current_snapshot().manifests(table.io)]
    target = 3 * max(lengths)
    result = rewrite_manifests(con, f"{c.NAMESPACE}.by_date", catalog_uri=catalog.test_uri,
                               target_manifest_size_mb=target / 1024 / 1024)
    assert [(r["content"], r["action"], r["manifests_before"]) for r in result] == [("data", "merged", 13)], result
    table = catalog.load_table(f"{c.NAMESPACE}.by_date")
    written = table.current_snapshot().manifests(table.io)
    assert 1 < len(written) == result[0]["manifests_after"] < 13, (len(written), result)
    for m in written:
        assert m.manifest_length <= target + max(lengths), (m.manifest_length, target)
        days = [e.data_file.partition[0] for e in m.fetch_manifest_entry(table.io, discard_deleted=True)]
        assert days == sorted(days), days
    assert entries(table) == before_entries
    assert duckdb_rows(iceberg_con, table.metadata_location) == before
