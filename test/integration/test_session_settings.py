"""Session settings never change what our SQL means.

A user's DuckDB may run with settings that change what a statement means: a case- or
accent-insensitive `default_collation`, a time zone, `NULLS FIRST` or `DESC` as the default order,
integer division, binary columns read as text, insertion order not preserved. Settings set with
plain `SET` are global for most of them, so they reach every connection of the database — the
extension's own too. The extension pins each on its connection (session scope; the user's
session keeps its values), so the rewrite compares strings by their bytes (equality deletes,
position-delete paths), writes binary as binary and keeps the layout's order. Every table is
written by pyiceberg and read back by DuckDB's iceberg extension on a fresh connection with
default settings, and by pyarrow for the files' own order and types.
"""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.typedef import Record
from pyiceberg.types import BinaryType, DateType, LongType, NestedField, StringType

import conftest as c
from test_compact_iceberg import compact, duckdb_rows

SMALL = {"small_file_threshold_mb": 1.0, "target_file_size_mb": 8.0}

# Settings a user may have that would change what our statements mean, at values that would
# (the defaults are '', UTC for us, ASC, NULLS_LAST, false, false, true, true), set GLOBAL so
# they reach every connection of the database, ours included.
HOSTILE = [
    "SET GLOBAL default_collation = 'nocase'",
    "SET GLOBAL TimeZone = 'Pacific/Kiritimati'",
    "SET GLOBAL default_order = 'DESC'",
    "SET GLOBAL default_null_order = 'NULLS_FIRST'",
    "SET GLOBAL integer_division = true",
    "SET GLOBAL binary_as_string = true",
    "SET GLOBAL preserve_insertion_order = false",
    "SET GLOBAL ieee_floating_point_ops = false",
]

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "day", DateType(), required=False),
    NestedField(3, "name", StringType(), required=False),
    NestedField(4, "payload", BinaryType(), required=False),
    NestedField(5, "tag", StringType(), required=False),
)
SPEC = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="day"))
# No NULL name: DuckDB's iceberg 1.5.5 also drops rows whose equality column is NULL for an
# equality delete without NULLs (the spec keeps them; so does our rewrite).
NAMES = ["alice", "Alice", "ALICE", "élan", "elan", "bob", "Bob", "Zoë"]
TAGS = [None, "b", "B", "a"]


def build(catalog):
    """Eight small files of one day, names that differ only by case or accent; an equality delete
    on name ('alice', 'elan') and a position delete of one file's first row, by pyiceberg."""
    table = catalog.create_table(f"{c.NAMESPACE}.names", schema=SCHEMA, partition_spec=SPEC,
                                 properties={"write.delete.mode": "merge-on-read"})
    arrow = pa.schema([("id", pa.int64()), ("day", pa.date32()), ("name", pa.string()), ("payload", pa.binary()),
                       ("tag", pa.string())])
    for f in range(8):
        rows = [{"id": f * 100 + i, "day": dt.date(2026, 10, 1), "name": NAMES[(f + i) % len(NAMES)],
                 "payload": bytes([f, i, 0xFF]), "tag": TAGS[i % len(TAGS)]} for i in range(40)]
        table.append(pa.Table.from_pylist(rows, schema=arrow))
    table = catalog.load_table(f"{c.NAMESPACE}.names")
    day = (dt.date(2026, 10, 1) - dt.date(1970, 1, 1)).days
    first = sorted(c.live_data_files(table), key=lambda f: f.file_path)[0]
    table = c.commit_files(table, [c.position_delete_file(table, first, [0])], deletes=True)
    return c.commit_files(table, [c.equality_delete_file(table, Record(day), "name", ["alice", "elan"])], deletes=True)


@pytest.fixture
def hostile_con(con):
    for statement in HOSTILE:
        con.execute(statement)
    return con


def test_deletes_compare_strings_by_their_bytes_whatever_the_session_collation(con, iceberg_con, catalog):
    """The equality delete on 'alice' deletes 'alice' only, not 'Alice' or 'ALICE' (nor 'élan'
    for 'elan'); before the settings were pinned, `default_collation = 'nocase.noaccent'` made the
    rewrite drop those rows, and its own deleted-row count agreed, so nothing noticed."""
    table = build(catalog)
    before = duckdb_rows(iceberg_con, table.metadata_location)
    names = [r[2] for r in before]  # columns sorted: day, id, name, payload, tag
    assert "alice" not in names and "elan" not in names and names.count("Alice") > 0 and "élan" in names
    con.execute("SET GLOBAL default_collation = 'nocase.noaccent'")
    assert con.execute("SELECT 'élan' = 'ELAN'").fetchone() == (True,), "the session compares without case or accent"
    result = compact(con, f"{c.NAMESPACE}.names", catalog_uri=catalog.test_uri, **SMALL)
    assert [(r["verdict"], r["delete_files_removed"]) for r in result] == [("compacted", 2)], result
    table = catalog.load_table(f"{c.NAMESPACE}.names")
    assert duckdb_rows(iceberg_con, table.metadata_location) == before, "rows lost or deleted rows back"
    assert [f["content"] for f in table.inspect.files().to_pylist()] == [0]
    assert con.execute("SELECT current_setting('default_collation')").fetchone() == ("nocase.noaccent",)


def test_every_setting_at_once_changes_nothing_written(hostile_con, iceberg_con, catalog):
    """All of HOSTILE at once: the same rows, and binary stays binary (before, `binary_as_string`
    made the rewrite read the binary column as text, and fail on bytes that are not UTF-8)."""
    table = build(catalog)
    before = duckdb_rows(iceberg_con, table.metadata_location)
    result = compact(hostile_con, f"{c.NAMESPACE}.names", catalog_uri=catalog.test_uri, **SMALL)
    assert [(r["verdict"], r["delete_files_removed"]) for r in result] == [("compacted", 2)], result
    table = catalog.load_table(f"{c.NAMESPACE}.names")
    assert duckdb_rows(iceberg_con, table.metadata_location) == before, "rows lost or deleted rows back"
    (new,) = [f["file_path"] for f in table.inspect.files().to_pylist()]
    assert pq.read_schema(c.local_path(new)).field("payload").type == pa.binary()
    assert hostile_con.execute("SELECT 'a' = 'A', current_setting('default_order')").fetchone() == (True, "DESC"), \
        "the user's session keeps its own settings"


def test_a_sorted_layout_orders_by_bytes_and_keeps_its_order_whatever_the_session(hostile_con, iceberg_con, catalog):
    """`sort_order := 'tag, name'` is Spark's `tag ASC NULLS FIRST, name ASC NULLS FIRST`, text by
    its bytes ('B' < 'a' < 'b'; 'ALICE' < 'Alice' < 'Bob' < 'Zoë' < 'bob' < 'élan'), whatever the
    session's collation, default order, null order or preserve_insertion_order; before, the
    layout was refused under such settings."""
    table = build(catalog)
    before = duckdb_rows(iceberg_con, table.metadata_location)
    result = compact(hostile_con, f"{c.NAMESPACE}.names", catalog_uri=catalog.test_uri, sort_order="tag, name", **SMALL)
    assert [r["verdict"] for r in result] == ["compacted"], result
    table = catalog.load_table(f"{c.NAMESPACE}.names")
    assert duckdb_rows(iceberg_con, table.metadata_location) == before
    (new,) = [f["file_path"] for f in table.inspect.files().to_pylist()]
    written = pq.read_table(c.local_path(new))
    keys = [((t is not None), (t or "").encode(), n.encode())
            for t, n in zip(written.column("tag").to_pylist(), written.column("name").to_pylist())]
    assert keys[0][0] is False, "NULLS FIRST, as the order says"
    assert keys == sorted(keys), "nulls first, then text in byte order, tag before name"
