"""Layout strategies (sort, z-order) and ``skip_recent_partitions`` on a table Apache Spark wrote.

The table (``days(ts)``, many small files per day) has two old days, yesterday and today (UTC,
from the clock at build time). Each test starts from the pristine copy. Checked by Spark (and
DuckDB's iceberg extension, and pyiceberg) rather than by our own reading:

- the same rows before and after every rewrite;
- a sorted rewrite: rows of each new file, read by Spark in file order (``_pos``), follow the
  order; the files' ``sort_order_id`` names a sort order Spark's table shows with those fields,
  and the table's default order is unchanged;
- a z-order rewrite: Iceberg's own planner, asked for point lookups ``x = a AND y = b``, keeps
  far fewer files than after a bin-pack of the same table (the point of z-order);
- today's partition is left alone (``skipped: still being written``), with a window also
  yesterday's, with ``'none'`` neither.
"""

from __future__ import annotations

import datetime as dt
import random
from typing import Any

import pytest

import spark as sp
from test_spark_conformance import BUILDERS, Lab, lab, other_reader_rows, run, sql_args  # noqa: F401

NAME = "layout"
OLD_DAYS = [dt.date(2026, 10, 1), dt.date(2026, 10, 2)]
# Every file of the table is small at this threshold; the target makes several files per old day.
SIZES = dict(small_file_threshold_mb=0.25, target_file_size_mb=0.25, fragmentation_ratio_threshold=0.35)


def _day_us(day: dt.date) -> int:
    return (day - dt.date(1970, 1, 1)).days * 86_400_000_000


def _insert_day(lab: Lab, day: dt.date, first_id: int, rows: int, files: int) -> None:
    """``rows`` rows of ``day`` in ``files`` files: x int (some NULL), y double, s string, spread
    pseudo-randomly so that no file clusters on any column."""
    lab.sql(
        f"""INSERT INTO {lab.ident(NAME)} SELECT /*+ REPARTITION({files}) */
            id,
            CASE WHEN id % 97 = 0 THEN NULL ELSE cast(pmod(hash(id), 10000) AS int) END AS x,
            pmod(hash(id, 7), 100000) / 10.0 AS y,
            concat('s', pmod(hash(id, 3), 1000)) AS s,
            timestamp_micros({_day_us(day)}L + cast(pmod(hash(id, 11), 86400) AS bigint) * 1000000L) AS ts
        FROM range({first_id}, {first_id + rows})"""
    )


def build_layout(lab: Lab, name: str) -> None:
    lab.sql(
        f"""CREATE TABLE {lab.ident(name)} (id bigint, x int, y double, s string, ts timestamp)
        USING iceberg PARTITIONED BY (days(ts))
        TBLPROPERTIES ('format-version'='2', 'write.distribution-mode'='none')"""
    )
    for k, day in enumerate(OLD_DAYS):
        _insert_day(lab, day, k * 1_000_000, 120_000, 16)
    today = dt.datetime.now(dt.timezone.utc).date()
    _insert_day(lab, today - dt.timedelta(days=1), 5_000_000, 2_000, 4)
    _insert_day(lab, today, 6_000_000, 2_000, 4)


BUILDERS[NAME] = build_layout


def _day_label(day: dt.date) -> str:
    return f"ts_day={day.isoformat()}"


def compact(con, lab: Lab, **params: Any) -> list[dict]:
    return run(con, f"SELECT * FROM lakehouse_compact('{lab.table_dir(NAME)}'" + sql_args(**SIZES, **params) + ")")


def _data_files(lab: Lab) -> list[dict]:
    return [f for f in lab.files(NAME) if f["content"] == 0]


def _partition_files(lab: Lab, day: dt.date) -> set[str]:
    labels = lab.file_labels(NAME)
    return {f["file_path"] for f in _data_files(lab) if labels[f["file_path"]][1] == _day_label(day)}


@pytest.fixture
def pristine(lab: Lab) -> Lab:
    lab.table(NAME)
    return lab


def test_sort_order_rewrite_sorts_each_file_and_records_its_order(pristine, con, iceberg_con):
    lab = pristine
    today = dt.datetime.now(dt.timezone.utc).date()
    rows_before = lab.rows(NAME)
    files_before = {f["file_path"] for f in _data_files(lab)}
    today_files = _partition_files(lab, today)
    readers_before = other_reader_rows(lab, NAME, iceberg_con)
    result = compact(con, lab, sort_order="x DESC NULLS LAST, s")

    by_label = {r["partition"]: r for r in result}
    assert by_label[_day_label(today)]["reason"] == "skipped: still being written"
    assert _partition_files(lab, today) == today_files, "today's files are untouched"
    for day in OLD_DAYS + [today - dt.timedelta(days=1)]:
        row = by_label[_day_label(day)]
        assert row["verdict"] == "compacted", row
        assert row["strategy"] == "sort(x DESC NULLS LAST, s ASC NULLS FIRST)"

    assert lab.rows(NAME) == rows_before, "Spark reads the same rows"
    for reader, rows in other_reader_rows(lab, NAME, iceberg_con).items():
        assert not isinstance(rows, Exception), f"{reader}: {rows}"
        assert rows == readers_before[reader], f"{reader} reads other rows after the rewrite"

    new_files = [f for f in _data_files(lab) if f["file_path"] not in files_before]
    assert len(new_files) >= 5
    java = lab.java_table(NAME)
    assert java.sortOrder().isUnsorted(), "the table's default order is unchanged"
    ids = {f["sort_order_id"] for f in new_files}
    assert len(ids) == 1 and None not in ids, ids
    order = java.sortOrders().get(ids.pop())
    fields = [(f.sourceId(), f.direction().name(), f.nullOrder().name(), str(f.transform())) for f in order.fields()]
    schema = java.schema()
    assert fields == [
        (schema.findField("x").fieldId(), "DESC", "NULLS_LAST", "identity"),
        (schema.findField("s").fieldId(), "ASC", "NULLS_FIRST", "identity"),
    ]
    for f in new_files:
        rows = lab.spark.sql(f"SELECT x, s FROM {lab.ident(NAME)} WHERE _file = '{f['file_path']}' ORDER BY _pos").collect()
        keys = [(0 if r.x is not None else 1, -(r.x or 0), r.s is not None, r.s or "") for r in rows]
        assert keys == sorted(keys), f"{f['file_path']} is not in x DESC NULLS LAST, s order"

    # Spark keeps writing and reading the table (the added sort order is valid metadata to it).
    lab.sql(f"INSERT INTO {lab.ident(NAME)} VALUES (-1, 1, 1.0, 'new', TIMESTAMP '2026-10-01 12:00:00')")
    assert len(lab.rows(NAME)) == len(rows_before) + 1


def _lookup_files(lab: Lab, points: list[tuple[int, float]], among: set[str]) -> float:
    """Average number of the files ``among`` that Iceberg's planner keeps for ``x = a AND y = b``."""
    expressions = lab.jvm.org.apache.iceberg.expressions.Expressions
    table = lab.java_table(NAME)
    total = 0
    for x, y in points:
        both = getattr(expressions, "and")(expressions.equal("x", x), expressions.equal("y", y))
        tasks = table.newScan().filter(both).planFiles()
        iterator = tasks.iterator()
        while iterator.hasNext():
            total += iterator.next().file().location() in among
        tasks.close()
    return total / len(points)


def test_zorder_keeps_rows_and_clusters_both_columns(pristine, con, iceberg_con):
    lab = pristine
    rows_before = lab.rows(NAME)
    rng = random.Random(18)
    old = [r for r in rows_before if r[1] is not None and r[4].date() in OLD_DAYS]
    points = [(r[1], r[2]) for r in rng.sample(old, 60)]

    files_before = {f["file_path"] for f in _data_files(lab)}
    compact(con, lab, strategy="binpack")
    binpack_files = {f["file_path"] for f in _data_files(lab)} - files_before
    binpacked = _lookup_files(lab, points, binpack_files)
    assert lab.rows(NAME) == rows_before

    lab.restore(NAME)
    readers_before = other_reader_rows(lab, NAME, iceberg_con)
    result = compact(con, lab, sort_order="zorder(x, y)")
    assert {r["strategy"] for r in result if r["verdict"] == "compacted"} == {"zorder(x, y)"}
    assert lab.rows(NAME) == rows_before, "Spark reads the same rows"
    for reader, rows in other_reader_rows(lab, NAME, iceberg_con).items():
        assert not isinstance(rows, Exception), f"{reader}: {rows}"
        assert rows == readers_before[reader], f"{reader} reads other rows after the rewrite"
    new_files = [f for f in _data_files(lab) if f["file_path"] not in files_before]
    assert new_files and all(f["sort_order_id"] is None for f in new_files), "no Iceberg sort order describes z-order"
    assert len(new_files) == len(binpack_files), "the same number of files as the bin-pack"
    zordered = _lookup_files(lab, points, {f["file_path"] for f in new_files})
    # Bin-packed files of a day all span the whole x and y range, so a lookup keeps every one
    # of its day; z-ordered ones split both columns, so the planner prunes most of them.
    assert binpacked >= 4, binpacked
    assert zordered <= binpacked / 2, (binpacked, zordered)


def test_skip_recent_partitions_windows(pristine, con):
    lab = pristine
    today = dt.datetime.now(dt.timezone.utc).date()
    yesterday = today - dt.timedelta(days=1)

    def reasons(**params: Any) -> dict[str, str]:
        return {r["partition"]: r["reason"] for r in compact(con, lab, dry_run=True, **params)}

    default = reasons()
    assert default[_day_label(today)] == "skipped: still being written"
    assert default[_day_label(yesterday)].startswith("compact:")
    assert all(default[_day_label(d)].startswith("compact:") for d in OLD_DAYS)
    day = reasons(skip_recent_partitions="1 day")
    assert day[_day_label(today)] == day[_day_label(yesterday)] == "skipped: still being written"
    assert all(day[_day_label(d)].startswith("compact:") for d in OLD_DAYS)
    none = reasons(skip_recent_partitions="none")
    assert none[_day_label(today)].startswith("compact:") and none[_day_label(yesterday)].startswith("compact:")
    # The gate takes the same parameters and shows the strategy per compacted partition.
    gate = run(
        con,
        f"SELECT partition, reason, strategy FROM lakehouse_gate('{lab.table_dir(NAME)}'"
        + sql_args(**SIZES, dry_run=True, sort_order="zorder(x, y)")
        + ")",
    )
    by_label = {r["partition"]: r for r in gate}
    assert by_label[_day_label(today)]["reason"] == "skipped: still being written"
    assert by_label[_day_label(today)]["strategy"] is None
    assert by_label[_day_label(OLD_DAYS[0])]["strategy"] == "zorder(x, y)"
