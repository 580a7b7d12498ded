"""Iceberg format v3 nanosecond timestamps (issue 51, item 6), on tables written and read by
Apache Iceberg's own Java library 1.10.1 (java_iceberg.py: Spark cannot write or read them, and
pyiceberg 0.12 writes no v3); pyiceberg and pyarrow read the results too.

- `timestamp_ns`: profile, health, expiry and compaction work. After compaction Iceberg's generic
  reader and pyiceberg see the same values to the nanosecond, the rewritten file's column is
  Parquet `TIMESTAMP(NANOS, isAdjustedToUTC=false)`, and the manifest's bounds are the column's
  minimum and maximum in nanoseconds (the spec's single-value serialization of `timestamp_ns`).
- `timestamptz_ns`: profile, health, orphan search and expiry work; compaction refuses, naming
  the column, and leaves every file as it was. DuckDB 1.5 reads Parquet `TIMESTAMP(NANOS, isAdjustedToUTC=true)`
  as `TIMESTAMP WITH TIME ZONE` (microseconds) whatever type `read_parquet(schema = …)` asks for,
  and has no type to write it back with, so no lossless rewrite exists here; the test shows the
  digits DuckDB would lose.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.table import StaticTable

from java_iceberg import JavaTable
from test_readonly_never_refuses import rows_of, snapshot_of

# (seconds after 2026-01-01 00:00:00, nanoseconds): sub-microsecond digits everywhere, and one
# value a nanosecond before the epoch (a negative bound).
VALUES = [[(0, 123_456_789), (0, 123_456_790)], [(1, 999_999_999), (2, 1)], [(-1, None), (3, 500)]]


def nanos_table(spark, root: Path, tz: bool) -> JavaTable:
    """Three appends (three data files) of (id, ts timestamp_ns[, tz timestamptz_ns])."""
    jvm = spark._jvm
    types = jvm.org.apache.iceberg.types.Types
    fields = [(1, "id", types.IntegerType.get()), (2, "ts", types.TimestampNanoType.withoutZone())]
    if tz:
        fields.append((3, "tz", types.TimestampNanoType.withZone()))
    java = JavaTable(spark, str(root), fields)
    LocalDateTime = jvm.java.time.LocalDateTime
    epoch_2026 = LocalDateTime.of(2026, 1, 1, 0, 0, 0)
    for b, batch in enumerate(VALUES):
        records = []
        for r, (seconds, nanos) in enumerate(batch):
            if nanos is None:  # one nanosecond before 1970-01-01
                value = LocalDateTime.of(1969, 12, 31, 23, 59, 59, 999_999_999)
            else:
                value = epoch_2026.plusSeconds(seconds).plusNanos(nanos)
            row = {"id": b * 10 + r, "ts": value}
            if tz:
                row["tz"] = value.atOffset(jvm.java.time.ZoneOffset.UTC)
            records.append(java.record(row))
        java.append(f"batch-{b}", records)
    return java


def compact(con, root: Path) -> list[dict]:
    return rows_of(con, f"SELECT * FROM lakehouse_compact('{root}', small_file_threshold_mb := 1, "
                        "fragmentation_ratio_threshold := 0, dry_run := false)")


def pyiceberg_nanos(root: Path) -> list[tuple]:
    """Every row as pyiceberg reads it, timestamps as integers (nanoseconds since the epoch)."""
    latest = max((root / "metadata").glob("v*.metadata.json"), key=lambda p: int(p.name[1:].split(".")[0]))
    arrow = StaticTable.from_metadata(str(latest)).scan().to_arrow()
    as_ints = arrow.cast(pa.schema([(f.name, pa.int64()) for f in arrow.schema]))
    return sorted(tuple(r.values()) for r in as_ints.to_pylist())


def test_timestamp_ns_is_compacted_to_the_nanosecond(spark, con, tmp_path):
    root = tmp_path / "ts_ns"
    java = nanos_table(spark, root, tz=False)
    rows_before, pyiceberg_before = java.rows(), pyiceberg_nanos(root)
    assert "2026-01-01T00:00:00.123456789" in rows_before[0] and len(rows_before) == 6

    [profile] = rows_of(con, f"SELECT total_files, compaction_blocked_by, cleanup_blocked_by "
                             f"FROM lakehouse_fragmentation('{root}', small_file_threshold_mb := 1)")
    assert profile == {"total_files": 3, "compaction_blocked_by": None, "cleanup_blocked_by": None}
    [health] = rows_of(con, f"SELECT snapshots, data_files, compaction_blocked_by FROM lakehouse_metadata_health('{root}')")
    assert health == {"snapshots": 3, "data_files": 3, "compaction_blocked_by": None}

    [row] = compact(con, root)
    assert (row["verdict"], row["input_files"], row["output_files"]) == ("compacted", 3, 1), row
    assert java.rows() == rows_before, "Iceberg's Java reader sees other values after the rewrite"
    assert pyiceberg_nanos(root) == pyiceberg_before

    [written] = java.live_files()
    path = str(written.location()).removeprefix("file:")
    column = pq.ParquetFile(path).schema_arrow.field("ts")
    assert column.type == pa.timestamp("ns"), column  # NANOS, not adjusted to UTC
    assert "isAdjustedToUTC=false, timeUnit=nanoseconds" in str(pq.ParquetFile(path).schema.column(1).logical_type)
    nanos = [v for (_, v) in pyiceberg_before]
    lower, upper = java.bounds(written, 2)
    assert (lower, upper) == (min(nanos), max(nanos)) == (-1, 1_767_225_603_000_000_500)

    # Expiry of the three appends' snapshots deletes exactly the replaced files.
    expired = rows_of(con, f"SELECT kind, path FROM lakehouse_expire_snapshots('{root}', snapshot_retention_days := 0)")
    assert sorted(Path(r["path"]).name for r in expired if r["kind"] == "data_file") == [
        "batch-0.parquet", "batch-1.parquet", "batch-2.parquet"]
    assert java.rows() == rows_before


def test_timestamptz_ns_is_profiled_and_expired_but_not_compacted(spark, con, tmp_path):
    root = tmp_path / "tstz_ns"
    java = nanos_table(spark, root, tz=True)
    rows_before = java.rows()
    [profile] = rows_of(con, f"SELECT total_files, compaction_blocked_by FROM lakehouse_fragmentation('{root}', "
                             "small_file_threshold_mb := 1)")
    why = profile["compaction_blocked_by"]
    assert profile["total_files"] == 3 and "column 'tz' of type timestamptz_ns" in why, profile
    [health] = rows_of(con, f"SELECT snapshots, compaction_blocked_by, cleanup_blocked_by "
                            f"FROM lakehouse_metadata_health('{root}')")
    assert health == {"snapshots": 3, "compaction_blocked_by": why, "cleanup_blocked_by": None}
    before = snapshot_of(root)
    with pytest.raises(duckdb.Error) as refused:
        compact(con, root)
    assert why in str(refused.value)
    assert snapshot_of(root) == before

    # Why: DuckDB reads the UTC-adjusted NANOS column as microseconds, whatever it is asked for.
    first = str(root / "data" / "batch-0.parquet")
    ask_ns = ("{3: {name: 'tz', type: 'TIMESTAMP_NS', default_value: NULL}, "
              "2: {name: 'ts', type: 'TIMESTAMP_NS', default_value: NULL}}")
    [(ts, tz)] = duckdb.sql(f"SELECT epoch_ns(ts), epoch_ns(tz) FROM read_parquet('{first}', schema = MAP {ask_ns}) "
                            "WHERE epoch_ns(ts) % 1000 = 789").fetchall()
    assert (ts, tz) == (1_767_225_600_123_456_789, 1_767_225_600_123_456_000)

    # Orphan search works on the table: a stray file is found.
    (root / "data" / "stray.parquet").write_bytes(b"x")
    orphans = rows_of(con, f"SELECT path FROM lakehouse_remove_orphan_files('{root}', older_than_days := 0, "
                           "allow_young_orphans := true)")
    assert [Path(r["path"]).name for r in orphans] == ["stray.parquet"], orphans

    # Expiry works on the table: two of three snapshots go, every row stays.
    expired = rows_of(con, f"SELECT kind FROM lakehouse_expire_snapshots('{root}', snapshot_retention_days := 0)")
    assert sum(r["kind"] == "snapshot" for r in expired) == 2
    assert java.rows() == rows_before


def test_a_table_partitioned_by_day_of_a_timestamp_ns_is_compacted_per_day(spark, con, tmp_path):
    """Partitioned by `day(ts)` of a `timestamp_ns` column (Iceberg parses each file's partition
    from its path): each day is compacted on its own, the new files keep their day (Java's
    partition data) and nanosecond bounds, and Java reads the same rows."""
    root = tmp_path / "by_day"
    jvm = spark._jvm
    types = jvm.org.apache.iceberg.types.Types
    java = JavaTable(spark, str(root), [(1, "id", types.IntegerType.get()), (2, "ts", types.TimestampNanoType.withoutZone())],
                     partition=lambda spec: spec.day("ts"))
    for b in range(4):
        value = jvm.java.time.LocalDateTime.of(2026, 1, 1 + b % 2, 0, 0, 0, 123_456_789 + b)
        java.append(f"f{b}", [java.record({"id": b, "ts": value})], partition_path=f"ts_day=2026-01-0{1 + b % 2}")
    rows_before = java.rows()
    plans = compact(con, root)
    assert sorted((p["partition"], p["verdict"], p["input_files"]) for p in plans) == [
        ("ts_day=2026-01-01", "compacted", 2), ("ts_day=2026-01-02", "compacted", 2)], plans
    assert java.rows() == rows_before
    day = 1_767_225_600_000_000_000
    written = sorted((str(f.partition()), java.bounds(f, 2)) for f in java.live_files())
    assert written == [("PartitionData{ts_day=20454}", (day + 123_456_789, day + 123_456_791)),
                       ("PartitionData{ts_day=20455}", (day + 86_400 * 10**9 + 123_456_790,
                                                         day + 86_400 * 10**9 + 123_456_792))], written
