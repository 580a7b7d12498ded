"""Integration tests: lakehouse_fragmentation against independent Iceberg readers.

For every scenario table of the ``warehouse`` fixture (see conftest.py) the per-partition
figures of ``lakehouse_fragmentation`` must equal those computed from pyiceberg's
``table.inspect.files()`` grouped by partition, and the table totals must equal DuckDB's
iceberg extension (``iceberg_metadata``). Then: every way of naming a table (metadata.json,
table directory, catalog identifiers), ``lakehouse_demo`` output read back by pyiceberg and
DuckDB, and bad inputs, whose errors must start with the function name.

Partition labels are rebuilt here from pyiceberg's partition structs the way the extension
prints them (Java Iceberg's human strings): identity values as their type prints, ``day`` as
``2026-10-01``, ``month`` as ``2026-10``, ``year`` as ``2026``, ``hour`` as ``2026-10-01-05``,
``bucket``/``truncate`` as the number, null as ``null``; fields joined with ``/``; a spec
without fields is ``(unpartitioned)``.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import re
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table import StaticTable, Table
from pyiceberg.transforms import (
    BucketTransform,
    DayTransform,
    HourTransform,
    IdentityTransform,
    MonthTransform,
    TruncateTransform,
    VoidTransform,
    YearTransform,
)

from conftest import (
    CATALOG_NAME,
    NAMESPACE,
    OTHER_CATALOG_NAME,
    Warehouse,
    load_iceberg,
    local_path,
)

MIB = 1024 * 1024
FN = "lakehouse_fragmentation"
SUMMARY_FN = "lakehouse_fragmentation_summary"
TABLES = ["by_date", "unpartitioned", "day_bucket", "time_transforms", "evolved", "with_deletes", "overwritten", "just_deleted"]

# A threshold (≈1.33 KB) between the sizes of the pyiceberg-written files (~0.8–2.3 KB).
SMALL_MB = 0.0013

PROFILE_COLUMNS = {
    "partition": "VARCHAR",
    "spec_id": "INTEGER",
    "total_files": "BIGINT",
    "small_files": "BIGINT",
    "total_size_mb": "DOUBLE",
    "avg_file_size_mb": "DOUBLE",
    "fragmentation_ratio": "DOUBLE",
    "requires_compaction": "BOOLEAN",
    "reason": "VARCHAR",
    "record_count": "BIGINT",
    "delete_files": "BIGINT",
    "total_size_bytes": "BIGINT",
    "small_size_bytes": "BIGINT",
    "dangling_delete_files": "BIGINT",
    "file_sizes": "VARCHAR",
    "file_size_counts": "VARCHAR",
    "file_size_buckets": "VARCHAR",
    "compaction_blocked_by": "VARCHAR",
    "cleanup_blocked_by": "VARCHAR",
}
SUMMARY_COLUMNS = {
    "total_partitions": "BIGINT",
    "total_lakehouse_files": "BIGINT",
    "total_small_files": "BIGINT",
    "fragmented_partition_count": "BIGINT",
    "avg_fragmentation_ratio": "DOUBLE",
    "compactable_mb": "DOUBLE",
    "projected_speedup_low": "DOUBLE",
    "projected_speedup_high": "DOUBLE",
    "compactable_bytes": "BIGINT",
    "compaction_blocked_by": "VARCHAR",
    "cleanup_blocked_by": "VARCHAR",
}
# The integer figures compared one-to-one with pyiceberg.
FIGURES = ["total_files", "small_files", "total_size_bytes", "small_size_bytes", "record_count", "delete_files"]


# --------------------------------------------------------------------------- SQL helpers


def sql_literal(value: Any) -> str:
    """A SQL literal for a Python value (strings quoted, None → NULL)."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, RawSql):
        return value.sql
    return "'" + str(value).replace("'", "''") + "'"


class RawSql:
    """A parameter value passed through verbatim (e.g. ``'NaN'::DOUBLE``)."""

    def __init__(self, sql: str) -> None:
        self.sql = sql


def call_sql(function: str, table: Any, **params: Any) -> str:
    """``SELECT * FROM function(table, name := value, …)``."""
    args = [sql_literal(table)] + [f"{name} := {sql_literal(value)}" for name, value in params.items()]
    return f"SELECT * FROM {function}({', '.join(args)})"


def fetch_dicts(con: duckdb.DuckDBPyConnection, sql: str) -> list[dict[str, Any]]:
    """Runs ``sql``; rows as dicts."""
    cursor = con.execute(sql)
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row)) for row in cursor.fetchall()]


def profile(con: duckdb.DuckDBPyConnection, table: Any, **params: Any) -> list[dict[str, Any]]:
    """Rows of lakehouse_fragmentation, sorted by (partition, spec_id)."""
    return sorted(fetch_dicts(con, call_sql(FN, table, **params)), key=lambda r: (r["partition"], r["spec_id"]))


def summary(con: duckdb.DuckDBPyConnection, table: Any, **params: Any) -> dict[str, Any]:
    """The single row of lakehouse_fragmentation_summary."""
    rows = fetch_dicts(con, call_sql(SUMMARY_FN, table, **params))
    assert len(rows) == 1, rows
    return rows[0]


def figures(rows: list[dict[str, Any]]) -> dict[tuple[str, int], dict[str, int]]:
    """(partition, spec_id) → the integer figures of a profile."""
    return {(r["partition"], r["spec_id"]): {k: r[k] for k in FIGURES} for r in rows}


_ERROR_CLASS = re.compile(r"^(?:[A-Z][A-Za-z]*\s)*Error:\s*")


def error_message(con: duckdb.DuckDBPyConnection, sql: str) -> str:
    """The message of the error ``sql`` must raise, without DuckDB's ``Xxx Error:`` prefix."""
    with pytest.raises(duckdb.Error) as info:
        con.execute(sql).fetchall()
    return _ERROR_CLASS.sub("", str(info.value), count=1)


def assert_error(con: duckdb.DuckDBPyConnection, sql: str, *fragments: str, function: str = FN) -> str:
    """Asserts ``sql`` fails with a message starting ``function:`` and containing ``fragments``."""
    message = error_message(con, sql)
    assert message.startswith(f"{function}:"), f"expected '{function}:' first, got: {message!r}"
    for fragment in fragments:
        assert fragment in message, f"expected {fragment!r} in {message!r}"
    return message


# --------------------------------------------------------------------------- expectations


def human(transform: Any, value: Any) -> str:
    """One partition value as the extension prints it."""
    if value is None or isinstance(transform, VoidTransform):
        return "null"
    if isinstance(transform, YearTransform):
        return str(1970 + value) if isinstance(value, int) else str(value.year)
    if isinstance(transform, MonthTransform):
        return f"{1970 + value // 12:04d}-{value % 12 + 1:02d}" if isinstance(value, int) else value.strftime("%Y-%m")
    if isinstance(transform, DayTransform):
        day = value if isinstance(value, dt.date) else dt.date(1970, 1, 1) + dt.timedelta(days=value)
        return day.isoformat()
    if isinstance(transform, HourTransform):
        hour = dt.datetime(1970, 1, 1) + dt.timedelta(hours=value) if isinstance(value, int) else value
        return hour.strftime("%Y-%m-%d-%H")
    if isinstance(transform, (BucketTransform, TruncateTransform, IdentityTransform)):
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, dt.datetime):
            raise NotImplementedError("identity on timestamps is not used by these tests")
        if isinstance(value, dt.date):
            return value.isoformat()
        if isinstance(value, bytes):
            return value.hex()
        return str(value)
    raise NotImplementedError(f"transform {transform}")


def partition_label(table: Table, spec_id: int, partition: dict[str, Any]) -> str:
    """The extension's label for a pyiceberg ``inspect.files()`` partition struct."""
    fields = table.metadata.specs()[spec_id].fields
    if not fields:
        return "(unpartitioned)"
    return "/".join(f"{f.name}={human(f.transform, partition.get(f.name))}" for f in fields)


def expected_profile(table: Table, small_mb: float) -> dict[tuple[str, int], dict[str, int]]:
    """Per (partition, spec) figures from ``table.inspect.files()``: the reference."""
    limit = small_mb * MIB
    groups: dict[tuple[str, int], dict[str, int]] = defaultdict(lambda: dict.fromkeys(FIGURES, 0))
    for f in table.inspect.files().to_pylist():
        g = groups[(partition_label(table, f["spec_id"], f["partition"]), f["spec_id"])]
        if f["content"] == 0:
            g["total_files"] += 1
            g["total_size_bytes"] += f["file_size_in_bytes"]
            g["record_count"] += f["record_count"]
            if f["file_size_in_bytes"] < limit:
                g["small_files"] += 1
                g["small_size_bytes"] += f["file_size_in_bytes"]
        elif f["content"] in (1, 2):
            g["delete_files"] += 1
    # The extension reports partitions that hold live data files.
    return {key: g for key, g in groups.items() if g["total_files"] > 0}


def duckdb_iceberg_totals(iceberg_con: duckdb.DuckDBPyConnection, metadata: str) -> dict[str, int]:
    """Live data files, their records and live delete files, per DuckDB's iceberg_metadata.

    In duckdb-iceberg 1.5.5 ``content`` of data files reads ``EXISTING`` (an enum mix-up), so
    data vs delete is taken from ``manifest_content`` (``DATA`` / ``DELETE``).
    """
    row = iceberg_con.execute(
        f"""
        SELECT count(*) FILTER (WHERE manifest_content = 'DATA'),
               coalesce(sum(record_count) FILTER (WHERE manifest_content = 'DATA'), 0),
               count(*) FILTER (WHERE manifest_content <> 'DATA')
        FROM iceberg_metadata({sql_literal(metadata)})
        WHERE status <> 'DELETED'
        """
    ).fetchone()
    return {"files": row[0], "records": row[1], "delete_files": row[2]}


def split_threshold_mb(table: Table) -> float:
    """A threshold just above the median data file size: about half the files are small."""
    sizes = sorted(f["file_size_in_bytes"] for f in table.inspect.files().to_pylist() if f["content"] == 0)
    return (sizes[len(sizes) // 2] + 0.5) / MIB


def round_ok(got: float, exact: float, digits: int) -> bool:
    """``got`` is ``exact`` rounded to ``digits`` decimals (either way at the half)."""
    return got == round(got, digits) and abs(got - exact) <= 0.5 * 10**-digits + 1e-9


# --------------------------------------------------------------------------- shape


def test_file_size_counts_match_pyicebergs_file_list(con, warehouse: Warehouse):
    """The size buckets (the documented edges T/64, T/16, T/4, T, 2T, 4T around the threshold T)
    hold the live data files pyiceberg lists, partition by partition, and the histogram has a
    block exactly where a bucket is non-empty."""
    table = warehouse.tables["by_date"]
    threshold = split_threshold_mb(table)
    edges = [threshold * MIB * k for k in (1 / 64, 1 / 16, 1 / 4, 1, 2, 4)]
    expected: dict[str, list[int]] = {}
    for f in table.inspect.files().to_pylist():
        if f["content"] == 0:
            counts = expected.setdefault(str(f["partition"]["partition_date"]), [0] * 7)
            counts[sum(f["file_size_in_bytes"] >= e for e in edges)] += 1
    profile = call_sql(FN, warehouse.metadata_path("by_date"), small_file_threshold_mb=threshold)
    rows = con.execute(f"SELECT partition, file_size_counts, file_sizes FROM ({profile})").fetchall()
    assert len(rows) == len(expected)
    for label, counts, drawn in rows:
        want = expected[label.split("=", 1)[1]]
        assert counts == ",".join(map(str, want[:4])) + "|" + ",".join(map(str, want[4:])), (label, counts, want)
        blocks = drawn.replace("│", "")
        assert [b != " " for b in blocks] == [n > 0 for n in want], (label, drawn, want)


def test_result_columns(con, warehouse: Warehouse):
    path = warehouse.metadata_path("by_date")
    described = con.execute(f"DESCRIBE {call_sql(FN, path)}").fetchall()
    assert {r[0]: r[1] for r in described} == PROFILE_COLUMNS
    assert [r[0] for r in described] == list(PROFILE_COLUMNS)
    described = con.execute(f"DESCRIBE {call_sql(SUMMARY_FN, path)}").fetchall()
    assert {r[0]: r[1] for r in described} == SUMMARY_COLUMNS


# --------------------------------------------------------------------------- figures vs readers


@pytest.mark.parametrize("name", TABLES)
def test_partitions_match_pyiceberg(con, warehouse: Warehouse, name: str):
    table = warehouse.tables[name]
    for threshold in (SMALL_MB, split_threshold_mb(table)):
        rows = profile(con, warehouse.metadata_path(name), small_file_threshold_mb=threshold)
        expected = expected_profile(table, threshold)
        assert expected, "the scenario table has no live data files"
        assert figures(rows) == expected, f"small_file_threshold_mb={threshold}"


@pytest.mark.parametrize("name", TABLES)
def test_derived_columns_are_consistent(con, warehouse: Warehouse, name: str):
    ratio_threshold = 0.5
    small_mb = split_threshold_mb(warehouse.tables[name])
    rows = profile(
        con, warehouse.metadata_path(name), small_file_threshold_mb=small_mb, fragmentation_ratio_threshold=ratio_threshold
    )
    assert rows
    for r in rows:
        assert round_ok(r["total_size_mb"], r["total_size_bytes"] / MIB, 2), r
        assert round_ok(r["avg_file_size_mb"], r["total_size_bytes"] / MIB / r["total_files"], 2), r
        assert round_ok(r["fragmentation_ratio"], r["small_files"] / r["total_files"], 4), r
        # Degraded: the ratio reaches the threshold and there are small files to merge (two or more).
        assert r["requires_compaction"] == (r["small_files"] / r["total_files"] >= ratio_threshold
                                            and r["small_files"] >= 2), r
        assert r["reason"].startswith("degraded: " if r["requires_compaction"] else "healthy: "), r
        assert r["small_files"] <= r["total_files"] and r["small_size_bytes"] <= r["total_size_bytes"], r


@pytest.mark.parametrize("name", TABLES)
def test_totals_match_duckdb_iceberg(con, iceberg_con, warehouse: Warehouse, name: str):
    metadata = warehouse.metadata_path(name)
    rows = profile(con, metadata)
    theirs = duckdb_iceberg_totals(iceberg_con, metadata)
    ours = {
        "files": sum(r["total_files"] for r in rows),
        "records": sum(r["record_count"] for r in rows),
        "delete_files": sum(r["delete_files"] for r in rows),
    }
    assert ours == theirs


@pytest.mark.parametrize("name", TABLES)
def test_summary_matches_partitions(con, warehouse: Warehouse, name: str):
    metadata = warehouse.metadata_path(name)
    params = dict(small_file_threshold_mb=split_threshold_mb(warehouse.tables[name]), fragmentation_ratio_threshold=0.5)
    rows = profile(con, metadata, **params)
    target_mb = 0.004
    got = summary(con, metadata, target_file_size_mb=target_mb, **params)
    degraded = [r for r in rows if r["requires_compaction"]]
    degraded_bytes = sum(r["total_size_bytes"] for r in degraded)
    assert got["total_partitions"] == len(rows)
    assert got["total_lakehouse_files"] == sum(r["total_files"] for r in rows)
    assert got["total_small_files"] == sum(r["small_files"] for r in rows)
    assert got["fragmented_partition_count"] == len(degraded)
    assert got["compactable_bytes"] == degraded_bytes
    assert round_ok(got["avg_fragmentation_ratio"], sum(r["small_files"] / r["total_files"] for r in rows) / len(rows), 4), got
    assert round_ok(got["compactable_mb"], degraded_bytes / MIB, 2), got
    # A range: the calibrated local-disk model below, files before / after above — at most the
    # degraded files over one file per degraded partition; no speedup when nothing is degraded.
    if degraded:
        most = sum(r["total_files"] for r in degraded) / len(degraded)
        assert 1 <= got["projected_speedup_low"] <= got["projected_speedup_high"] <= round(most, 2), got
    else:
        assert (got["projected_speedup_low"], got["projected_speedup_high"]) == (1.0, 1.0), got


def test_expected_scenarios(con, warehouse: Warehouse):
    """Spot checks of labels and verdicts that the generic comparisons take for granted."""
    by_date = {r["partition"]: r for r in profile(con, warehouse.metadata_path("by_date"), small_file_threshold_mb=0.01)}
    assert sorted(by_date) == ["partition_date=2026-10-01", "partition_date=2026-10-02", "partition_date=2026-10-03"]
    assert [by_date[p]["total_files"] for p in sorted(by_date)] == [6, 6, 1]
    assert [by_date[p]["requires_compaction"] for p in sorted(by_date)] == [True, True, False]

    unpartitioned = profile(con, warehouse.metadata_path("unpartitioned"))
    assert [(r["partition"], r["total_files"], r["record_count"]) for r in unpartitioned] == [("(unpartitioned)", 4, 612)]

    day_bucket = {r["partition"] for r in profile(con, warehouse.metadata_path("day_bucket"))}
    assert "ts_day=2026-10-01/id_bucket=0" in day_bucket
    assert any(p.startswith("ts_day=null/id_bucket=") for p in day_bucket)

    time_transforms = {r["partition"] for r in profile(con, warehouse.metadata_path("time_transforms"))}
    assert "ts_hour=2026-10-01-05/d_month=2026-09/d2_year=1969/flag=false" in time_transforms
    assert "ts_hour=2026-10-01-06/d_month=2026-10/d2_year=2026/flag=true" in time_transforms
    assert any(p.endswith("/d2_year=null/flag=true") for p in time_transforms)

    evolved = {(r["partition"], r["spec_id"]) for r in profile(con, warehouse.metadata_path("evolved"))}
    assert {("region=eu", 0), ("region=null", 0), ("region=eu/tier=0", 1), ("region=null/tier=1", 1)} <= evolved

    with_deletes = {r["partition"]: r for r in profile(con, warehouse.metadata_path("with_deletes"))}
    assert sum(r["delete_files"] for r in with_deletes.values()) >= 2
    assert with_deletes["partition_date=2026-10-01"]["delete_files"] >= 1
    assert with_deletes["partition_date=2026-10-02"]["delete_files"] >= 1
    if not warehouse.pyiceberg_wrote_deletes:
        # pyiceberg 0.12 rewrote the file on delete(): only the two delete files written by conftest.
        assert sum(r["delete_files"] for r in with_deletes.values()) == 2

    just_deleted = {r["partition"]: r["total_files"] for r in profile(con, warehouse.metadata_path("just_deleted"))}
    assert just_deleted == {"partition_date=2026-10-01": 3}, "DELETED entries must not count"

    overwritten = {r["partition"]: r["total_files"] for r in profile(con, warehouse.metadata_path("overwritten"))}
    assert overwritten == {
        "partition_date=2026-10-01": 3,
        "partition_date=2026-10-03": 1,
        "partition_date=2026-10-04": 1,
    }


def test_thresholds_move_the_verdict(con, warehouse: Warehouse):
    path = warehouse.metadata_path("by_date")
    everything = profile(con, path, small_file_threshold_mb=0.01, fragmentation_ratio_threshold=0.0)
    # A partition without small files has nothing to compact, whatever the ratio threshold.
    assert [r["requires_compaction"] for r in everything] == [True, True, False]
    assert everything[2]["reason"] == "healthy: no small files"
    strict = profile(con, path, small_file_threshold_mb=0.01, fragmentation_ratio_threshold=1.0)
    assert [r["requires_compaction"] for r in strict] == [True, True, False]
    huge = profile(con, path, small_file_threshold_mb=1024)
    assert all(r["small_files"] == r["total_files"] for r in huge)
    tiny = profile(con, path, small_file_threshold_mb=0.0001)
    assert all(r["small_files"] == 0 and not r["requires_compaction"] for r in tiny)
    defaults = profile(con, path)
    assert all(r["small_files"] == r["total_files"] for r in defaults), "default threshold is 64 MiB"


# --------------------------------------------------------------------------- naming a table


def test_table_directory_needs_version_hint_or_latest_metadata(con, warehouse: Warehouse):
    table_dir = warehouse.table_dir("by_date")
    assert not os.path.exists(os.path.join(table_dir, "metadata", "version-hint.text"))
    assert_error(con, call_sql(FN, table_dir), "latest_metadata := true")
    latest = profile(con, table_dir, latest_metadata=True)
    assert latest == profile(con, warehouse.metadata_path("by_date"))


def test_metadata_path_as_file_uri(con, warehouse: Warehouse):
    uri = warehouse.tables["by_date"].metadata_location
    assert uri.startswith("file://")
    assert profile(con, uri) == profile(con, warehouse.metadata_path("by_date"))


def test_catalog_identifier_from_env(con, warehouse: Warehouse, clean_catalog_env):
    clean_catalog_env.setenv("PYICEBERG_CATALOG__DEFAULT__URI", warehouse.uri)
    expected = profile(con, warehouse.metadata_path("by_date"))
    assert profile(con, f"{NAMESPACE}.by_date") == expected
    assert profile(con, f"{CATALOG_NAME}.{NAMESPACE}.by_date") == expected
    assert profile(con, f"{NAMESPACE}.evolved") == profile(con, warehouse.metadata_path("evolved"))


def test_catalog_uri_param(con, warehouse: Warehouse, clean_catalog_env):
    expected = profile(con, warehouse.metadata_path("by_date"))
    assert profile(con, f"{NAMESPACE}.by_date", catalog_uri=warehouse.uri) == expected
    assert profile(con, f"{NAMESPACE}.by_date", catalog_uri=warehouse.uri, warehouse=warehouse.warehouse) == expected


def test_params_override_env(con, warehouse: Warehouse, clean_catalog_env, tmp_path: Path):
    clean_catalog_env.setenv("PYICEBERG_CATALOG__DEFAULT__URI", f"sqlite:///{tmp_path}/elsewhere.db")
    expected = profile(con, warehouse.metadata_path("by_date"))
    assert profile(con, f"{NAMESPACE}.by_date", catalog_uri=warehouse.uri) == expected


def _write_yaml(directory: Path, warehouse: Warehouse) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / ".pyiceberg.yaml").write_text(
        "catalog:\n"
        f"  {CATALOG_NAME}:\n"
        "    type: sql\n"
        f"    uri: {warehouse.uri}\n"
        f"    warehouse: {warehouse.warehouse}\n"
        f"  {OTHER_CATALOG_NAME}:\n"
        f"    uri: {warehouse.uri}\n"
    )


def test_catalog_from_pyiceberg_home_yaml(con, warehouse: Warehouse, clean_catalog_env, tmp_path: Path):
    home = tmp_path / "pyiceberg-home"
    _write_yaml(home, warehouse)
    clean_catalog_env.setenv("PYICEBERG_HOME", str(home))
    expected = profile(con, warehouse.metadata_path("by_date"))
    assert profile(con, f"{NAMESPACE}.by_date") == expected
    assert profile(con, f"{OTHER_CATALOG_NAME}.{NAMESPACE}.by_date") == expected
    assert profile(con, f"{NAMESPACE}.by_date", catalog=OTHER_CATALOG_NAME) == expected


def test_catalog_from_home_yaml(con, warehouse: Warehouse, clean_catalog_env, tmp_path: Path):
    home = tmp_path / "home"
    _write_yaml(home, warehouse)
    clean_catalog_env.setenv("HOME", str(home))
    assert profile(con, f"{NAMESPACE}.by_date") == profile(con, warehouse.metadata_path("by_date"))


def test_named_catalog_from_env(con, warehouse: Warehouse, clean_catalog_env):
    clean_catalog_env.setenv(f"PYICEBERG_CATALOG__{OTHER_CATALOG_NAME.upper()}__URI", warehouse.uri)
    expected = profile(con, warehouse.metadata_path("by_date"))
    assert profile(con, f"{OTHER_CATALOG_NAME}.{NAMESPACE}.by_date") == expected
    assert profile(con, f"{NAMESPACE}.by_date", catalog=OTHER_CATALOG_NAME) == expected
    # `evolved` exists only under the default catalog name.
    assert_error(con, call_sql(FN, f"{NAMESPACE}.evolved", catalog=OTHER_CATALOG_NAME), "not found")


def test_summary_accepts_catalog_identifier(con, warehouse: Warehouse, clean_catalog_env):
    expected = summary(con, warehouse.metadata_path("by_date"))
    assert summary(con, f"{NAMESPACE}.by_date", catalog_uri=warehouse.uri) == expected


# --------------------------------------------------------------------------- lakehouse_demo


@pytest.fixture(scope="module")
def demo(lakehouse_extension: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One default lakehouse_demo table (scale 0.001) and its result row."""
    path = tmp_path_factory.mktemp("demo") / "table"
    connection = duckdb.connect(config={"allow_unsigned_extensions": "true"})
    connection.execute(f"LOAD '{lakehouse_extension}'")
    rows = fetch_dicts(connection, f"SELECT * FROM lakehouse_demo({sql_literal(str(path))})")
    connection.close()
    assert len(rows) == 1, rows
    return {**rows[0], "path": str(path)}


def test_demo_result_row(demo: dict[str, Any]):
    assert set(demo) >= {
        "table_location",
        "metadata_location",
        "partitions",
        "data_files",
        "snapshots",
        "total_bytes",
        "record_count",
        "small_file_threshold_mb",
    }
    assert demo["partitions"] == 4
    assert demo["snapshots"] == 16
    assert demo["small_file_threshold_mb"] == pytest.approx(64 * 0.001)
    assert os.path.isfile(local_path(demo["metadata_location"]))
    assert os.path.isfile(os.path.join(demo["path"], "metadata", "version-hint.text"))


def test_demo_readable_by_pyiceberg(demo: dict[str, Any]):
    table = StaticTable.from_metadata(demo["metadata_location"])
    assert table.format_version == 2
    assert table.scan().to_arrow().num_rows == demo["record_count"]
    files = table.inspect.files()
    assert files.num_rows == demo["data_files"]
    assert sum(files.column("file_size_in_bytes").to_pylist()) == demo["total_bytes"]
    assert len(table.metadata.snapshots) == demo["snapshots"]


def test_demo_readable_by_duckdb_iceberg(iceberg_con, demo: dict[str, Any]):
    metadata = local_path(demo["metadata_location"])
    assert iceberg_con.execute(f"SELECT count(*) FROM iceberg_scan({sql_literal(metadata)})").fetchone()[0] == demo["record_count"]
    totals = duckdb_iceberg_totals(iceberg_con, metadata)
    assert (totals["files"], totals["records"]) == (demo["data_files"], demo["record_count"])


def test_demo_has_history_older_than_a_week(demo: dict[str, Any]):
    table = StaticTable.from_metadata(demo["metadata_location"])
    week_ago_ms = (time.time() - 7 * 24 * 3600) * 1000
    snapshots = sorted(table.metadata.snapshots, key=lambda s: s.sequence_number)
    stamps = [s.timestamp_ms for s in snapshots]
    assert any(ts < week_ago_ms for ts in stamps), stamps
    assert stamps == sorted(stamps), "timestamps should grow with sequence numbers"
    assert table.current_snapshot().snapshot_id == snapshots[-1].snapshot_id


def test_demo_profile(con, demo: dict[str, Any]):
    threshold = demo["small_file_threshold_mb"]
    by_dir = profile(con, demo["path"], small_file_threshold_mb=threshold)
    assert by_dir == profile(con, local_path(demo["metadata_location"]), small_file_threshold_mb=threshold)
    verdicts = {r["partition"]: r["requires_compaction"] for r in by_dir}
    assert verdicts == {
        "partition_date=2026-10-01": True,
        "partition_date=2026-10-02": True,
        "partition_date=2026-10-03": False,
        "partition_date=2026-10-04": False,
    }
    table = StaticTable.from_metadata(demo["metadata_location"])
    assert figures(by_dir) == expected_profile(table, threshold)
    assert sum(r["total_files"] for r in by_dir) == demo["data_files"]
    assert sum(r["total_size_bytes"] for r in by_dir) == demo["total_bytes"]
    got = summary(con, demo["path"], small_file_threshold_mb=threshold)
    assert (got["total_partitions"], got["fragmented_partition_count"]) == (4, 2)


def test_demo_into_non_empty_directory_fails(con, demo: dict[str, Any]):
    assert_error(con, f"SELECT * FROM lakehouse_demo({sql_literal(demo['path'])})", function="lakehouse_demo")


# --------------------------------------------------------------------------- bad input


@pytest.fixture
def broken_table(tmp_path: Path) -> dict[str, str]:
    """A small pyiceberg table in its own catalog with one manifest file deleted."""
    catalog = SqlCatalog("broken", uri=f"sqlite:///{tmp_path}/broken.db", warehouse=f"file://{tmp_path}/wh")
    catalog.create_namespace("ns")
    table = catalog.create_table("ns.t", schema=pa.schema([pa.field("id", pa.int64())]))
    for i in range(3):
        table.append(pa.table({"id": pa.array([i], pa.int64())}))
    manifest = table.current_snapshot().manifests(table.io)[0].manifest_path
    os.remove(local_path(manifest))
    return {"metadata": local_path(table.metadata_location), "manifest": local_path(manifest)}


@pytest.fixture
def bad_metadata(tmp_path: Path, warehouse: Warehouse) -> dict[str, str]:
    """Corrupt, truncated and non-Iceberg JSON metadata files, and a non-table directory."""
    real = Path(warehouse.metadata_path("by_date")).read_text()
    paths = {
        "corrupt": tmp_path / "corrupt.metadata.json",
        "truncated": tmp_path / "truncated.metadata.json",
        "not_iceberg": tmp_path / "other.metadata.json",
        "empty": tmp_path / "empty.metadata.json",
    }
    paths["corrupt"].write_text("{ this is not json")
    paths["truncated"].write_text(real[: len(real) // 2])
    paths["not_iceberg"].write_text(json.dumps({"hello": "world"}))
    paths["empty"].write_text("")
    not_a_table = tmp_path / "not_a_table"
    (not_a_table / "data").mkdir(parents=True)
    (not_a_table / "data" / "x.parquet").write_bytes(b"PAR1")
    result = {k: str(v) for k, v in paths.items()}
    result["not_a_table"] = str(not_a_table)
    return result


def test_missing_path(con, tmp_path: Path):
    missing = str(tmp_path / "nope")
    assert_error(con, call_sql(FN, missing), "does not exist")
    assert_error(con, call_sql(FN, missing + ".metadata.json"), "does not exist")
    assert_error(con, call_sql(SUMMARY_FN, missing), "does not exist", function=SUMMARY_FN)


@pytest.mark.parametrize("kind", ["corrupt", "truncated", "not_iceberg", "empty"])
def test_invalid_metadata_json(con, bad_metadata: dict[str, str], kind: str):
    assert_error(con, call_sql(FN, bad_metadata[kind]), "not valid Iceberg table metadata")


def test_directory_that_is_not_a_table(con, bad_metadata: dict[str, str]):
    assert_error(con, call_sql(FN, bad_metadata["not_a_table"]), "not an Iceberg table directory")
    assert_error(con, call_sql(FN, bad_metadata["not_a_table"], latest_metadata=True), "not an Iceberg table directory")


def test_deleted_manifest(con, broken_table: dict[str, str]):
    message = assert_error(con, call_sql(FN, broken_table["metadata"]), "manifest", "does not exist")
    assert os.path.basename(broken_table["manifest"]) in message


def test_unknown_catalog(con, clean_catalog_env):
    assert_error(con, call_sql(FN, "ns.t", catalog="nope"), "catalog 'nope'", "not configured")
    assert_error(con, call_sql(FN, "ns.t"), "catalog", "not configured")


def test_table_missing_from_catalog(con, warehouse: Warehouse, clean_catalog_env):
    assert_error(con, call_sql(FN, f"{NAMESPACE}.missing", catalog_uri=warehouse.uri), f"'{NAMESPACE}.missing'", "not found")
    assert_error(con, call_sql(FN, "other_ns.by_date", catalog_uri=warehouse.uri), "not found")


@pytest.mark.parametrize(
    "params, fragment",
    [
        ({"small_file_threshold_mb": RawSql("'NaN'::DOUBLE")}, "small_file_threshold_mb"),
        ({"small_file_threshold_mb": RawSql("'Infinity'::DOUBLE")}, "small_file_threshold_mb"),
        ({"small_file_threshold_mb": -1}, "small_file_threshold_mb must be a positive"),
        ({"small_file_threshold_mb": 0}, "small_file_threshold_mb must be a positive"),
        ({"small_file_threshold_mb": "abc"}, "small_file_threshold_mb must be a number"),
        ({"fragmentation_ratio_threshold": 1.5}, "fragmentation_ratio_threshold must be between 0 and 1"),
        ({"fragmentation_ratio_threshold": -0.1}, "fragmentation_ratio_threshold must be between 0 and 1"),
        ({"fragmentation_ratio_threshold": RawSql("'NaN'::DOUBLE")}, "fragmentation_ratio_threshold"),
    ],
    ids=["nan-size", "inf-size", "negative-size", "zero-size", "text-size", "ratio-above-1", "ratio-below-0", "nan-ratio"],
)
def test_invalid_thresholds(con, warehouse: Warehouse, params: dict[str, Any], fragment: str):
    path = warehouse.metadata_path("by_date")
    assert_error(con, call_sql(FN, path, **params), fragment)
    assert_error(con, call_sql(SUMMARY_FN, path, **params), fragment, function=SUMMARY_FN)


def test_invalid_target_file_size(con, warehouse: Warehouse):
    path = warehouse.metadata_path("by_date")
    for value in (0, -5, RawSql("'NaN'::DOUBLE")):
        assert_error(con, call_sql(SUMMARY_FN, path, target_file_size_mb=value), "target_file_size_mb", function=SUMMARY_FN)


def test_null_table(con):
    assert_error(con, call_sql(FN, None), "table must not be NULL")
    assert_error(con, call_sql(SUMMARY_FN, None), "table must not be NULL", function=SUMMARY_FN)


def test_errors_leave_connection_usable(con, warehouse: Warehouse, tmp_path: Path):
    assert_error(con, call_sql(FN, str(tmp_path / "nope")), "does not exist")
    assert profile(con, warehouse.metadata_path("unpartitioned"))[0]["total_files"] == 4


def test_duckdb_iceberg_extension_loads():
    """Sanity check of the reference reader itself (no lakehouse extension needed)."""
    connection = duckdb.connect(config={"allow_unsigned_extensions": "true"})
    load_iceberg(connection)
    names = {r[0] for r in connection.execute("SELECT function_name FROM duckdb_functions()").fetchall()}
    assert {"iceberg_metadata", "iceberg_scan"} <= names
