"""Column defaults: a rewrite writes what a reader sees.

A column added with an `initial-default` reads as that value in every data file written before
the column existed (pyiceberg adds such columns to format v2 tables; DuckDB's iceberg extension and
pyiceberg honour the default when reading). Compaction must write that value into the new file —
not NULL — and its non-null check must count it; a struct field's default likewise, inside every
non-null struct. Tables by pyiceberg; rows by DuckDB's iceberg extension and
pyiceberg; the new files' own values by pyarrow.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.schema import Schema
from pyiceberg.types import (
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    IntegerType,
    ListType,
    MapType,
    LongType,
    NestedField,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
)

import conftest as c
from test_compact_iceberg import compact, duckdb_rows, pyiceberg_rows

SMALL = {"small_file_threshold_mb": 1.0, "target_file_size_mb": 8.0}
UTC = dt.timezone.utc

# (name, type, initial-default): what rows written before the column existed read as.
DEFAULTS = [
    ("flag", BooleanType(), True),
    ("n", IntegerType(), 42),
    ("big", LongType(), -(2**40)),
    ("d", DateType(), dt.date(2020, 2, 2)),
    ("s", StringType(), "n/a, it's"),
    ("m", DecimalType(10, 2), decimal.Decimal("-1.25")),
    ("ts", TimestampType(), dt.datetime(2020, 1, 1, 12, 30, 0, 123456)),
    ("tz", TimestamptzType(), dt.datetime(2020, 1, 1, 12, 30, tzinfo=UTC)),
    ("x", DoubleType(), 2.5),
]


def build(catalog):
    """Three small files with only `id`, then the columns of DEFAULTS added with their defaults,
    then three small files that have them (values and NULLs): one partition, six files."""
    table = catalog.create_table(f"{c.NAMESPACE}.defaults", schema=Schema(NestedField(1, "id", LongType(), required=False)))
    for f in range(3):
        table.append(pa.table({"id": pa.array([f * 10 + i for i in range(5)], pa.int64())}))
    with table.update_schema() as update:
        for name, ty, default in DEFAULTS:
            update.add_column(name, ty, default_value=default)
    table = catalog.load_table(f"{c.NAMESPACE}.defaults")
    arrow = table.schema().as_arrow()
    for f in range(3, 6):
        rows = [{"id": f * 10 + i} | {name: (None if i % 2 else default) for name, _, default in DEFAULTS}
                for i in range(5)]
        table.append(pa.Table.from_pylist(rows, schema=arrow))
    return catalog.load_table(f"{c.NAMESPACE}.defaults")


def test_compaction_writes_the_default_a_reader_sees_in_files_without_the_column(con, iceberg_con, catalog):
    table = build(catalog)
    before = duckdb_rows(iceberg_con, table.metadata_location)
    old = [r for r in before if r[sorted(["id"] + [n for n, _, _ in DEFAULTS]).index("id")] < 30]
    assert len(old) == 15 and pyiceberg_rows(table) == before, "both readers see the defaults in the old files"
    result = compact(con, f"{c.NAMESPACE}.defaults", catalog_uri=catalog.test_uri, **SMALL)
    assert [(r["verdict"], r["output_files"]) for r in result] == [("compacted", 1)], result
    table = catalog.load_table(f"{c.NAMESPACE}.defaults")
    assert duckdb_rows(iceberg_con, table.metadata_location) == before, "a default came back as NULL"
    assert pyiceberg_rows(table) == before
    # The value is in the file itself now, not left to a reader's default.
    (path,) = [f["file_path"] for f in table.inspect.files().to_pylist()]
    written = pq.read_table(c.local_path(path)).to_pylist()
    for row in written:
        if row["id"] < 30:
            for name, _, default in DEFAULTS:
                assert row[name] == default, (name, row)
    # The manifest counts what was written: every old row has the default.
    (entry,) = table.inspect.files().to_pylist()
    flag_id = table.schema().find_field("flag").field_id
    nulls = dict(entry["null_value_counts"])
    assert nulls[flag_id] == 6, nulls  # the NULLs written explicitly into files 3..5 (2 per file)


def compacted_file(con, catalog, name: str) -> str:
    """Compacts the table ``name`` into one file, checking that pyiceberg reads the same rows
    before and after; the new file's local path."""
    table = catalog.load_table(f"{c.NAMESPACE}.{name}")
    before = pyiceberg_rows(table)
    result = compact(con, f"{c.NAMESPACE}.{name}", catalog_uri=catalog.test_uri, **SMALL)
    assert [(r["verdict"], r["output_files"]) for r in result] == [("compacted", 1)], result
    table = catalog.load_table(f"{c.NAMESPACE}.{name}")
    assert pyiceberg_rows(table) == before
    (path,) = [f["file_path"] for f in table.inspect.files().to_pylist()]
    return c.local_path(path)


def test_a_nested_default_is_written_where_its_struct_is_not_null(con, iceberg_con, catalog):
    """A struct field added with a default inside an existing struct column (format v2, the
    rewrite without row lineage): files written before it read it as the default inside every
    non-null struct, and the struct stays NULL where it was NULL. The compaction writes exactly
    that into the new file (pyarrow reads it there); pyiceberg reads the same rows before and
    after."""
    schema = Schema(NestedField(1, "id", LongType(), required=False),
                    NestedField(2, "st", StructType(NestedField(3, "a", IntegerType(), required=False)), required=False))
    table = catalog.create_table(f"{c.NAMESPACE}.nested_default", schema=schema)
    for f in range(4):
        rows = [{"id": f, "st": {"a": f}}, {"id": 10 + f, "st": None if f % 2 else {"a": None}}]
        table.append(pa.Table.from_pylist(rows, schema=table.schema().as_arrow()))
    with table.update_schema() as update:
        update.add_column(("st", "b"), IntegerType(), default_value=7)
    table = catalog.load_table(f"{c.NAMESPACE}.nested_default")
    table.append(pa.Table.from_pylist([{"id": 4, "st": {"a": 4, "b": 8}}], schema=table.schema().as_arrow()))
    path = compacted_file(con, catalog, "nested_default")
    written = {r["id"]: r["st"] for r in pq.read_table(path).to_pylist()}
    assert written == {0: {"a": 0, "b": 7}, 1: {"a": 1, "b": 7}, 2: {"a": 2, "b": 7}, 3: {"a": 3, "b": 7},
                       4: {"a": 4, "b": 8}, 10: {"a": None, "b": 7}, 11: None, 12: {"a": None, "b": 7},
                       13: None}, written


def test_defaults_inside_list_elements_and_map_values_are_written(con, catalog):
    """Fields added with a default to the struct of a list's elements and of a map's values:
    every non-null element and value of the files written before reads the default (NULL
    elements, values, lists and maps stay NULL, empty ones empty, order kept); the rewrite writes
    exactly that (pyarrow on the new file), and pyiceberg reads the same rows before and after."""
    element = StructType(NestedField(4, "a", IntegerType(), required=False))
    value = StructType(NestedField(7, "v", IntegerType(), required=False))
    schema = Schema(NestedField(1, "id", LongType(), required=False),
                    NestedField(2, "l", ListType(3, element, element_required=False), required=False),
                    NestedField(5, "m", MapType(6, StringType(), 8, value, value_required=False), required=False))
    table = catalog.create_table(f"{c.NAMESPACE}.list_default", schema=schema)
    old = [{"id": 0, "l": [{"a": 0}, None, {"a": 1}], "m": [("k", {"v": 1}), ("n", None)]},
           {"id": 1, "l": None, "m": None}, {"id": 2, "l": [], "m": []}]
    for row in old:
        table.append(pa.Table.from_pylist([row], schema=table.schema().as_arrow()))
    with table.update_schema() as update:
        update.add_column(("l", "element", "b"), IntegerType(), default_value=7)
        update.add_column(("m", "value", "w"), StringType(), default_value="w?")
    table = catalog.load_table(f"{c.NAMESPACE}.list_default")
    table.append(pa.Table.from_pylist([{"id": 3, "l": [{"a": 3, "b": 8}], "m": [("k", {"v": 3, "w": "x"})]}],
                                      schema=table.schema().as_arrow()))
    path = compacted_file(con, catalog, "list_default")
    written = {r["id"]: (r["l"], r["m"]) for r in pq.read_table(path).to_pylist()}
    assert written == {
        0: ([{"a": 0, "b": 7}, None, {"a": 1, "b": 7}], [("k", {"v": 1, "w": "w?"}), ("n", None)]),
        # pyiceberg 0.12 wrote row 1's None list and map as empty ones (its file holds []).
        1: ([], []), 2: ([], []), 3: ([{"a": 3, "b": 8}], [("k", {"v": 3, "w": "x"})])}, written


def test_a_default_this_version_cannot_read_is_never_dropped_from_the_table(con, catalog, tmp_path):
    """A default iceberg-rust cannot parse (here: a date written as text it does not accept) would
    be lost from the schema by any commit that writes the metadata, and written as NULL by a
    rewrite. Every action that would write is refused, naming the column; the metadata file
    is unchanged."""
    table = build(catalog)
    metadata = Path(c.local_path(table.metadata_location))
    doc = json.loads(metadata.read_text())
    for field in doc["schemas"][-1]["fields"]:
        if field["name"] == "d":
            field["initial-default"] = "2020-02-02T00:00:00"  # not a date literal
    v1 = tmp_path / "metadata" / "v1.metadata.json"
    v1.parent.mkdir()
    v1.write_text(json.dumps(doc))
    for call in (
        f"SELECT * FROM lakehouse_compact('{v1}', small_file_threshold_mb := 1, target_file_size_mb := 8)",
        f"SELECT * FROM lakehouse_expire_snapshots('{v1}', snapshot_retention_days := 0, retain_last := 1)",
        f"SELECT * FROM lakehouse_rewrite_manifests('{v1}')",
    ):
        with pytest.raises(Exception, match="column defaults cannot all be read.*column 'd'"):
            con.execute(call).fetchall()
    assert sorted(p.name for p in v1.parent.iterdir()) == ["v1.metadata.json"], "nothing was committed"


def test_a_file_without_its_identity_partition_column_is_not_rewritten(con, iceberg_con, catalog):
    """A file added without its identity partition column (as a Hive migration adds them: the
    value lives in the directory name and the manifest's partition tuple) reads that column as the
    partition value — the spec's first rule for a missing column, before any default. The rewrite
    does not write it, so the partition is skipped, saying why; before, the new file held NULL
    there and the region was lost for every reader."""
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.typedef import Record

    schema = Schema(NestedField(1, "id", LongType(), required=False), NestedField(2, "region", StringType(), required=False))
    spec = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="region"))
    table = catalog.create_table(f"{c.NAMESPACE}.migrated", schema=schema, partition_spec=spec)
    for f in range(3):
        table.append(pa.Table.from_pylist([{"id": f, "region": "eu"}], schema=table.schema().as_arrow()))
    table = catalog.load_table(f"{c.NAMESPACE}.migrated")
    id_only = pa.schema([pa.field("id", pa.int64(), metadata={"PARQUET:field_id": "1"})])
    migrated = c.data_file(table, pa.table({"id": pa.array([10, 11], pa.int64())}, schema=id_only), ("eu",), "region=eu")
    table = c.commit_files(table, [migrated])
    before = pyiceberg_rows(table)
    assert sorted(before) == sorted([(i, "eu") for i in (0, 1, 2, 10, 11)]), "pyiceberg reads the partition value"
    metadata = table.metadata_location
    result = compact(con, f"{c.NAMESPACE}.migrated", catalog_uri=catalog.test_uri, **SMALL)
    assert [r["verdict"] for r in result] == ["skipped"], result
    assert "lacks the identity partition column 'region'" in result[0]["reason"], result
    assert catalog.load_table(f"{c.NAMESPACE}.migrated").metadata_location == metadata
    assert pyiceberg_rows(catalog.load_table(f"{c.NAMESPACE}.migrated")) == before
