"""Row-group stitching (lakehouse_compact's ``stitch``, on by default): where a bin-pack group's
files share one Parquet schema, have no deletes to apply and row groups of a useful size, their
column chunks are copied into the new file instead of re-encoded.

Writers we did not write build every table (pyiceberg, deltalake), readers we did not write
check the rows before and after (pyiceberg's scan, DuckDB's iceberg and delta extensions,
deltalake), and pyarrow reads the new file's own footer. What must not be stitched (tiny row
groups, evolved schemas, deletes, ``stitch := false``) is re-encoded, and a file whose bytes do
not decode fails the compaction with the table untouched.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake
from pyiceberg.types import LongType, NestedField

import conftest as c
import delta_tables as d
import spark as sp
from test_compact_iceberg import compact, duckdb_rows, pyiceberg_rows

ROWS_PER_FILE = 100_000
FILES = 6


def batch(start: int, rows: int = ROWS_PER_FILE, seed: int = 7, element: str = "element") -> pa.Table:
    """Rows that compress poorly (random hex), so a file of 100,000 is ~4.6 MiB in one row group;
    nested columns, nulls and repeated values too. ``element``: the name of the list's element
    field (pyarrow's default is ``item``; deltalake's appends write ``element``)."""
    rnd = random.Random(seed + start)
    return pa.table({
        "id": pa.array(range(start, start + rows), pa.int64()),
        "payload": pa.array([os.urandom(12).hex() for _ in range(rows)]),
        "value": pa.array([None if i % 11 == 0 else rnd.random() for i in range(rows)], pa.float64()),
        "tags": pa.array([[f"t{rnd.randrange(50)}"] * (i % 3) for i in range(rows)], pa.list_(pa.field(element, pa.string()))),
        "point": pa.array(
            [{"x": float(i), "y": None if i % 7 == 0 else rnd.random()} for i in range(rows)],
            pa.struct([("x", pa.float64()), ("y", pa.float64())]),
        ),
    })


def build_iceberg(catalog, name: str = "stitchable", properties: dict | None = None):
    table = catalog.create_table(f"{c.NAMESPACE}.{name}", schema=batch(0, 1).schema, properties=properties or {})
    for k in range(FILES):
        table.append(batch(k * ROWS_PER_FILE))
    return table.refresh()


def data_files(table) -> list[dict]:
    return [f for f in table.inspect.files().to_pylist() if f["content"] == 0]


def row_groups(path: str) -> int:
    return pq.ParquetFile(c.local_path(path)).metadata.num_row_groups


def test_iceberg_files_are_stitched_and_read_back_identically(con, iceberg_con, catalog):
    table = build_iceberg(catalog)
    before = pyiceberg_rows(table)
    assert before == duckdb_rows(iceberg_con, table.metadata_location)
    inputs = data_files(table)
    assert len(inputs) == FILES
    groups_before = sum(row_groups(f["file_path"]) for f in inputs)

    result = compact(con, f"{c.NAMESPACE}.stitchable", catalog_uri=catalog.test_uri)
    assert [(r["verdict"], r["method"], r["input_files"], r["output_files"]) for r in result] == [
        ("compacted", "stitch", FILES, 1)
    ], result

    table = table.refresh()
    assert pyiceberg_rows(table) == before
    assert duckdb_rows(iceberg_con, table.metadata_location) == before
    [out] = data_files(table)
    footer = pq.ParquetFile(c.local_path(out["file_path"])).metadata
    assert "stitched" in footer.created_by
    # Every input row group is in the new file, none re-encoded, and the file is its inputs' size
    # less their footers.
    assert footer.num_row_groups == groups_before
    assert out["file_size_in_bytes"] <= sum(f["file_size_in_bytes"] for f in inputs)
    assert out["record_count"] == FILES * ROWS_PER_FILE
    # The manifest's figures are the file's: counts per column, bounds of the ids.
    schema = table.schema()
    id_field, value_field = schema.find_field("id").field_id, schema.find_field("value").field_id
    assert dict(out["value_counts"])[id_field] == FILES * ROWS_PER_FILE
    assert dict(out["null_value_counts"])[value_field] == sum(
        1 for k in range(FILES) for i in range(ROWS_PER_FILE) if i % 11 == 0
    )
    assert dict(out["lower_bounds"])[id_field] == (0).to_bytes(8, "little", signed=True)
    assert dict(out["upper_bounds"])[id_field] == (FILES * ROWS_PER_FILE - 1).to_bytes(8, "little", signed=True)
    # Readers prune on those bounds and still find every row.
    last = FILES * ROWS_PER_FILE - 1
    assert iceberg_con.execute(
        f"SELECT count(*) FROM iceberg_scan('{table.metadata_location}') WHERE id = {last}"
    ).fetchone() == (1,)


def test_a_dry_run_says_it_would_stitch_and_writes_nothing(con, catalog):
    table = build_iceberg(catalog)
    result = compact(con, f"{c.NAMESPACE}.stitchable", catalog_uri=catalog.test_uri, dry_run=True)
    assert [(r["verdict"], r["method"]) for r in result] == [("would compact", "stitch")]
    assert table.refresh().metadata_location == table.metadata_location


def test_stitch_false_re_encodes(con, iceberg_con, catalog):
    table = build_iceberg(catalog)
    before = pyiceberg_rows(table)
    result = compact(con, f"{c.NAMESPACE}.stitchable", catalog_uri=catalog.test_uri, stitch=False)
    assert [(r["verdict"], r["method"], r["method_reason"]) for r in result] == [
        ("compacted", "re-encode", "stitch := false")
    ]
    table = table.refresh()
    assert pyiceberg_rows(table) == before == duckdb_rows(iceberg_con, table.metadata_location)
    [out] = data_files(table)
    assert "stitched" not in pq.ParquetFile(c.local_path(out["file_path"])).metadata.created_by


def test_tiny_row_groups_are_re_encoded(con, iceberg_con, catalog):
    table = build_iceberg(catalog, properties={"write.parquet.row-group-limit": "2000"})
    assert row_groups(data_files(table)[0]["file_path"]) > 10
    before = pyiceberg_rows(table)
    result = compact(con, f"{c.NAMESPACE}.stitchable", catalog_uri=catalog.test_uri)
    assert [(r["verdict"], r["method"]) for r in result] == [("compacted", "re-encode")]
    assert "below the 2 MiB worth keeping" in result[0]["method_reason"], result
    table = table.refresh()
    assert pyiceberg_rows(table) == before == duckdb_rows(iceberg_con, table.metadata_location)
    [out] = data_files(table)
    # DuckDB's own row groups, not the inputs' 300.
    assert row_groups(out["file_path"]) < 10


def test_files_of_an_older_schema_are_re_encoded_to_the_current_one(con, iceberg_con, catalog):
    table = catalog.create_table(f"{c.NAMESPACE}.evolving", schema=batch(0, 1).schema)
    for k in range(3):
        table.append(batch(k * ROWS_PER_FILE))
    with table.update_schema() as update:
        update.add_column("extra", LongType())
    table = table.refresh()
    for k in range(3, 5):
        rows = batch(k * ROWS_PER_FILE)
        table.append(rows.append_column("extra", pa.array(range(ROWS_PER_FILE), pa.int64())))
    table = table.refresh()
    before = pyiceberg_rows(table)
    result = compact(con, f"{c.NAMESPACE}.evolving", catalog_uri=catalog.test_uri)
    assert [(r["verdict"], r["method"]) for r in result] == [("compacted", "re-encode")]
    why = result[0]["method_reason"]
    assert "another Parquet schema" in why or "other columns than the table's current schema" in why, result
    table = table.refresh()
    assert pyiceberg_rows(table) == before == duckdb_rows(iceberg_con, table.metadata_location)
    assert any(isinstance(f, NestedField) and f.name == "extra" for f in table.schema().fields)


def test_a_chunk_that_does_not_decode_fails_the_compaction_and_leaves_the_table(con, catalog):
    """An input whose column chunk bytes are garbage (its footer fine): the stitched file is read
    back before the commit, the read fails, nothing is committed and no file is left behind."""
    table = build_iceberg(catalog)
    victim = c.local_path(data_files(table)[2]["file_path"])
    footer = pq.ParquetFile(victim).metadata
    column = footer.row_group(0).column(1)
    with open(victim, "r+b") as f:
        f.seek(column.data_page_offset)
        f.write(b"\xff" * 64)
    listing_before = sorted(p.name for p in Path(victim).parent.iterdir())
    metadata_before = table.metadata_location
    with pytest.raises(Exception, match="lakehouse_compact"):
        compact(con, f"{c.NAMESPACE}.stitchable", catalog_uri=catalog.test_uri)
    assert table.refresh().metadata_location == metadata_before
    assert sorted(p.name for p in Path(victim).parent.iterdir()) == listing_before


# --------------------------------------------------------------------------- Delta


def build_delta(root: Path, first_element: str = "element") -> Path:
    """Six appends; the first names its list element ``first_element``."""
    path = root / "delta_stitchable"
    for k in range(FILES):
        write_deltalake(str(path), batch(k * ROWS_PER_FILE, element=first_element if k == 0 else "element"), mode="append")
    return path


def test_delta_files_are_stitched_and_read_back_identically(con, tmp_path):
    path = build_delta(tmp_path)
    columns = batch(0, 1).column_names
    before = d.rows_deltalake(path)
    duck = d.delta_connection()
    assert d.rows_duckdb(duck, path) == before
    version_before = d.current_version(path)

    cur = con.execute(f"SELECT verdict, method, input_files, output_files FROM lakehouse_compact('{path}')")
    assert cur.fetchall() == [("compacted", "stitch", FILES, 1)]

    assert d.current_version(path) == version_before + 1
    assert d.rows_deltalake(path) == before
    assert d.rows_duckdb(duck, path) == before
    [add] = [a for a in d.commit_actions(path, version_before + 1) if "add" in a]
    # Named after the codec its chunks keep (deltalake writes Snappy), as Spark names files.
    assert add["add"]["path"].endswith(".snappy.parquet"), add["add"]["path"]
    footer = pq.ParquetFile(path / add["add"]["path"]).metadata
    assert "stitched" in footer.created_by and footer.num_row_groups >= FILES
    stats = __import__("json").loads(add["add"]["stats"])
    assert stats["numRecords"] == FILES * ROWS_PER_FILE
    assert stats["minValues"]["id"] == 0 and stats["maxValues"]["id"] == FILES * ROWS_PER_FILE - 1
    assert stats["nullCount"]["value"] == sum(1 for k in range(FILES) for i in range(ROWS_PER_FILE) if i % 11 == 0)
    assert DeltaTable(str(path)).to_pyarrow_table().num_rows == FILES * ROWS_PER_FILE
    assert len(columns) == len(DeltaTable(str(path)).schema().fields)


def test_delta_files_of_two_parquet_schemas_are_re_encoded(con, tmp_path):
    """pyarrow names a list's element ``item``, deltalake's later appends ``element``: the files
    differ in their Parquet schema, so their chunks cannot share one footer."""
    path = build_delta(tmp_path, first_element="item")
    before = d.rows_deltalake(path)
    cur = con.execute(f"SELECT verdict, method, method_reason FROM lakehouse_compact('{path}')")
    [(verdict, method, why)] = cur.fetchall()
    assert (verdict, method) == ("compacted", "re-encode") and "another Parquet schema" in why, why
    assert d.rows_deltalake(path) == before
    assert d.rows_duckdb(d.delta_connection(), path) == before


def build_delta_of_ints(root: Path, partitioned: bool) -> Path:
    """Three deltalake appends of 200,000 rows each (one ~2.5 MiB row group per file, what
    stitching takes): an int32 ``n``, a random ``payload``, a string ``p`` (the partition column
    when ``partitioned``, one value)."""
    path = root / "delta_ints"
    for k in range(3):
        rows = 200_000
        table = pa.table({
            "n": pa.array(range(k * rows, (k + 1) * rows), pa.int32()),
            "payload": pa.array([os.urandom(12).hex() for _ in range(rows)]),
            "p": pa.array(["x"] * rows),
        })
        write_deltalake(str(path), table, mode="append", partition_by=["p"] if partitioned else None)
    return path


def commit_protocol_and_schema(path: Path, protocol: dict, widen_n: bool) -> None:
    """One commit, as a writer that knows the features makes it (`ALTER TABLE … SET
    TBLPROPERTIES`, `ALTER COLUMN n TYPE bigint`): ``protocol``, and with ``widen_n`` the schema with
    ``n`` widened from integer to long (`delta.typeChanges`)."""
    import json

    version = d.current_version(path)
    (metadata,) = [a for a in d.commit_actions(path, 0) if "metaData" in a]
    if widen_n:
        schema = json.loads(metadata["metaData"]["schemaString"])
        (n,) = [f for f in schema["fields"] if f["name"] == "n"]
        n["type"], n["metadata"] = "long", {"delta.typeChanges": [{"fromType": "integer", "toType": "long"}]}
        metadata["metaData"]["schemaString"] = json.dumps(schema)
        metadata["metaData"]["configuration"]["delta.enableTypeWidening"] = "true"
    actions = [{"commitInfo": {"timestamp": 1, "operation": "SET TBLPROPERTIES"}}, {"protocol": protocol}, metadata]
    (path / "_delta_log" / f"{version + 1:020}.json").write_text("".join(json.dumps(a) + "\n" for a in actions))


@pytest.mark.parametrize("feature", ["typeWidening", "materializePartitionColumns"])
def test_delta_files_a_feature_asks_to_change_are_re_encoded(con, tmp_path, feature):
    """Files of one Parquet schema with row groups worth stitching, but the table widened ``n``
    (the inputs hold int32, new files must hold int64) or asks for its partition column in every
    new file (the inputs lack it): re-encoded, saying why, and pyarrow reads the change in the new
    file; deltalake and DuckDB's delta extension read the rows as before."""
    widen = feature == "typeWidening"
    path = build_delta_of_ints(tmp_path, partitioned=not widen)
    protocol = {"minReaderVersion": 3 if widen else 1, "minWriterVersion": 7,
                "writerFeatures": ["appendOnly", "invariants", feature]}
    if widen:
        protocol["readerFeatures"] = [feature]
    commit_protocol_and_schema(path, protocol, widen_n=widen)
    before = d.rows_duckdb(d.delta_connection(), path)
    version = d.current_version(path)
    cur = con.execute(f"SELECT verdict, method, method_reason FROM lakehouse_compact('{path}')")
    [(verdict, method, why)] = cur.fetchall()
    assert (verdict, method) == ("compacted", "re-encode") and feature in why, why
    [add] = [a["add"] for a in d.commit_actions(path, version + 1) if "add" in a]
    schema = pq.read_schema(d._abs(path, add["path"]))
    if widen:
        assert schema.field("n").type == pa.int64(), schema
    else:
        assert schema.field("p").type == pa.string(), schema
    assert d.rows_duckdb(d.delta_connection(), path) == before
    if not widen:  # deltalake 1.6.6 refuses to read typeWidening ("not yet supported by the deltalake reader")
        assert d.rows_deltalake(path) == before


# --------------------------------------------------------------------------- Apache Spark

# Spark's rows: ~3 MiB per file (one row group each, as Spark's writers make them), nested and
# decimal columns, nulls.
SPARK_SELECT = """SELECT id, sha2(cast(id AS string), 256) AS payload, cast(id * 1.25 AS decimal(12, 2)) AS amount,
    CASE WHEN id % 13 = 0 THEN NULL ELSE concat('n', id % 97) END AS name,
    named_struct('a', cast(id % 1000 AS int), 'b', concat('b', id % 7)) AS props,
    array(concat('t', id % 5), 'x') AS tags
    FROM range({start}, {end})"""
SPARK_ROWS_PER_INSERT = 180_000


def test_spark_iceberg_files_are_stitched_and_spark_reads_identical_rows(con, iceberg_con, spark, spark_warehouse):
    lab = sp.SparkTables(spark, spark_warehouse)
    t = lab.ident("stitch_iceberg")
    lab.sql(f"""CREATE TABLE {t} (id bigint, payload string, amount decimal(12,2), name string,
        props struct<a:int, b:string>, tags array<string>) USING iceberg
        TBLPROPERTIES ('format-version'='2', 'write.distribution-mode'='none')""")
    for k in range(2):
        select = SPARK_SELECT.format(start=k * SPARK_ROWS_PER_INSERT, end=(k + 1) * SPARK_ROWS_PER_INSERT)
        lab.sql(f"INSERT INTO {t} SELECT /*+ REPARTITION(3) */ * FROM ({select})")
    before = lab.rows("stitch_iceberg")
    files_before = spark.sql(f"SELECT file_path, record_count FROM {t}.files").collect()
    assert len(files_before) == 6

    cur = con.execute(f"SELECT verdict, method, input_files, output_files FROM lakehouse_compact('{lab.table_dir('stitch_iceberg')}')")
    assert cur.fetchall() == [("compacted", "stitch", 6, 1)]

    spark.sql(f"REFRESH TABLE {t}")
    assert lab.rows("stitch_iceberg") == before
    [after] = spark.sql(f"SELECT file_path, record_count, lower_bounds, upper_bounds FROM {t}.files").collect()
    assert after.record_count == 2 * SPARK_ROWS_PER_INSERT
    footer = pq.ParquetFile(sp.local_path(after.file_path)).metadata
    assert "stitched" in footer.created_by and footer.num_row_groups == 6
    # Spark's planner prunes on our bounds and still finds the rows.
    last = 2 * SPARK_ROWS_PER_INSERT - 1
    assert [r.id for r in spark.sql(f"SELECT id FROM {t} WHERE id = {last}").collect()] == [last]
    # DuckDB's iceberg extension reads what Spark reads.
    metadata = sorted((lab.table_dir("stitch_iceberg") / "metadata").glob("v*.metadata.json"))[-1]
    aggregate = "count(*), sum(id), sum(amount), count(name), sum(props.a), max(payload)"
    spark_figures = tuple(spark.sql(f"SELECT {aggregate} FROM {t}").collect()[0])
    duck_figures = iceberg_con.execute(f"SELECT {aggregate} FROM iceberg_scan('{metadata}')").fetchone()
    assert duck_figures == spark_figures


def test_spark_delta_files_are_stitched_and_spark_reads_identical_rows(con, spark, tmp_path):
    path = tmp_path / "stitch_delta"
    for k in range(2):
        select = SPARK_SELECT.format(start=k * SPARK_ROWS_PER_INSERT, end=(k + 1) * SPARK_ROWS_PER_INSERT)
        spark.sql(select).repartition(3).write.format("delta").mode("append").save(str(path))
    # Each reader shows nested values its own way: each is compared with itself.
    readers = {
        "spark": lambda: d.rows_spark(spark, path),
        "deltalake": lambda: d.rows_deltalake(path),
        "duckdb": lambda: d.rows_duckdb(d.delta_connection(), path),
    }
    before = {name: read() for name, read in readers.items()}
    assert len(before["spark"]) == len(before["deltalake"]) == 2 * SPARK_ROWS_PER_INSERT

    cur = con.execute(f"SELECT verdict, method, input_files, output_files FROM lakehouse_compact('{path}')")
    assert cur.fetchall() == [("compacted", "stitch", 6, 1)]

    for name, read in readers.items():
        assert read() == before[name], name
    last = 2 * SPARK_ROWS_PER_INSERT - 1
    frame = spark.read.format("delta").load(str(path)).where(f"id = {last}")
    assert [r.id for r in frame.collect()] == [last]
