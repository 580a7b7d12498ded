"""A UniForm table's Iceberg view is never stranded by our VACUUM (issue 51, item 3).

Delta's converter writes Iceberg metadata into `<table>/metadata/` naming the Delta log's data
files, but only when a converting writer commits (Spark with `io.delta:delta-iceberg`, which the
registries this project builds from do not serve, or Databricks). After a commit that does not
convert, ours included, the view lags the log: it still reads the files the commit replaced.

The view here is what the converter writes, made by Apache Iceberg's own Java library (1.10.1,
in the test SparkSession's JVM): a table at the Delta table's location whose schema carries the
column-mapping field ids and whose snapshot appends the Delta table's live Parquet files as they
are (Iceberg reads them by those ids). The Delta table is Spark 4 + Delta 4's, with
`icebergCompatV2` (column mapping by name, no deletion vectors).

- Our compaction rewrites the table; the view still reads every row from the files it names.
- Spark's VACUUM would delete those files (its dry run lists them, and with only the feature
  listed the view's `metadata/` too); ours keeps every file the view references and deletes the
  replaced files the view never named (written after it).
- A view metadata file that cannot be read stops the vacuum before anything is deleted.
- The view reads the same rows as Delta before and after both; Spark reads the same Delta rows.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import delta_tables as d

RETENTION_H = 0


def spark_rows(spark: Any, root: Path) -> list[tuple]:
    return sorted(tuple(r) for r in spark.read.format("delta").load(str(root)).select("id", "v").collect())


def iceberg_view(spark: Any, root: Path, version: int) -> Any:
    """What the converter would write for Delta ``version``: a Hadoop Iceberg table at ``root``
    (format v2) with the Delta schema's logical names and column-mapping ids, whose one snapshot
    appends the version's live files, and ``delta-version`` among its properties."""
    jvm = spark._jvm
    iceberg = jvm.org.apache.iceberg
    schema_json = next(a["metaData"]["schemaString"] for a in d.commit_actions(root, 0) if "metaData" in a)
    columns = jvm.java.util.ArrayList()
    types = {"long": iceberg.types.Types.LongType.get(), "string": iceberg.types.Types.StringType.get()}
    for field in json.loads(schema_json)["fields"]:
        columns.add(iceberg.types.Types.NestedField.optional(field["metadata"]["delta.columnMapping.id"],
                                                               field["name"], types[field["type"]]))
    props = jvm.java.util.HashMap()
    props.put("format-version", "2")
    props.put("delta-version", str(version))
    tables = iceberg.hadoop.HadoopTables(spark._jsc.hadoopConfiguration())
    table = tables.create(iceberg.Schema(columns), iceberg.PartitionSpec.unpartitioned(), props, str(root))
    append = table.newAppend()
    for f in d.files_deltalake(root):
        stats = json.loads(next(a["add"]["stats"] for v in d.commit_versions(root) for a in d.commit_actions(root, v)
                                if "add" in a and d._abs(root, a["add"]["path"]) == f.path))
        append.appendFile(iceberg.DataFiles.builder(table.spec()).withPath("file:" + f.path)
                          .withFormat(iceberg.FileFormat.PARQUET).withFileSizeInBytes(Path(f.path).stat().st_size)
                          .withRecordCount(stats["numRecords"]).build())
    append.commit()
    return tables


def view_rows(spark: Any, tables: Any, root: Path) -> list[tuple]:
    """The rows Iceberg's own generic reader reads through the view."""
    records = spark._jvm.org.apache.iceberg.data.IcebergGenerics.read(tables.load(str(root))).build()
    out, it = [], records.iterator()
    while it.hasNext():
        r = it.next()
        out.append((r.getField("id"), r.getField("v")))
    records.close()
    return sorted(out)


@pytest.fixture
def uniform(spark, tmp_path) -> tuple[Path, Any, set[str]]:
    """The table, its view (made after two INSERTs), and the files of the third INSERT, which
    the view does not name."""
    root = tmp_path / "uniform"
    t = f"delta.`{root}`"
    d.spark_sql(spark, f"CREATE TABLE {t} (id bigint, v string) USING delta TBLPROPERTIES ("
                       "'delta.enableIcebergCompatV2' = 'true', 'delta.columnMapping.mode' = 'name', "
                       "'delta.enableDeletionVectors' = 'false')")
    for k in range(2):
        d.spark_sql(spark, f"INSERT INTO {t} SELECT /*+ REPARTITION(2) */ id, concat('v', id) FROM range({k * 10}, {k * 10 + 10})")
    tables = iceberg_view(spark, root, d.current_version(root))
    named = {f.path for f in d.files_deltalake(root)}
    d.spark_sql(spark, f"INSERT INTO {t} SELECT /*+ REPARTITION(2) */ id, concat('v', id) FROM range(20, 30)")
    unnamed = {f.path for f in d.files_deltalake(root)} - named
    assert len(named) == 4 and len(unnamed) == 2
    return root, tables, unnamed


def test_vacuum_keeps_the_files_a_lagging_iceberg_view_reads(con, spark, uniform):
    root, tables, unnamed = uniform
    delta_before = spark_rows(spark, root)
    view_before = view_rows(spark, tables, root)
    assert len(delta_before) == 30 and len(view_before) == 20
    replaced = {f.path for f in d.files_deltalake(root)}
    rows = con.execute(f"SELECT verdict FROM lakehouse_compact('{root}', small_file_threshold_mb := 1)").fetchall()
    assert rows == [("compacted",)], rows
    assert spark_rows(spark, root) == delta_before
    assert view_rows(spark, tables, root) == view_before, "the lagging view still reads its files"
    d.age_files(root)

    # What Spark's VACUUM would delete: every replaced file, the view's too (and, with no
    # `enabledFormats`, the view's metadata itself).
    assert replaced <= d.vacuum_spark(spark, root, RETENTION_H)
    deleted = {r[0] for r in con.execute(
        f"SELECT path FROM lakehouse_vacuum('{root}', retention_hours := {RETENTION_H}, "
        "enforce_retention_duration := false, dry_run := false)").fetchall()}
    assert deleted == unnamed, "only the replaced files the view never named are deleted"
    assert all(Path(p).exists() for p in replaced - unnamed)
    assert view_rows(spark, tables, root) == view_before
    assert spark_rows(spark, root) == delta_before


def test_an_unreadable_view_metadata_file_stops_the_vacuum(con, spark, uniform):
    root, _, _ = uniform
    con.execute(f"SELECT * FROM lakehouse_compact('{root}', small_file_threshold_mb := 1)").fetchall()
    d.age_files(root)
    (root / "metadata" / "v9.metadata.json").write_text("{ not json")
    listing = d.listing(root)
    with pytest.raises(Exception, match="keeps Iceberg metadata \\(UniForm\\).*nothing was deleted"):
        con.execute(f"SELECT * FROM lakehouse_vacuum('{root}', retention_hours := {RETENTION_H}, "
                    "enforce_retention_duration := false, dry_run := false)").fetchall()
    assert d.listing(root) == listing
