#!/usr/bin/env python3
"""Benchmark: compacting thousands of small Parquet files, Iceberg and Delta, with lakehouse vs delta-rs vs pyiceberg vs Spark vs bare DuckDB.

Usage::

    .venv/bin/python bench/bench_compact.py [--dir /tmp/lakehouse-bench-compact] [--gb 1.0] [--files 5000] [--repeat 1]

One set of source data is written once by DuckDB and cached under ``--dir``: at least ``--gb``
GiB in at least ``--files`` small Parquet files (~200 KB each: one row group of a multiple of
2,048 rows per file, Snappy, DuckDB's default), spread evenly over 4 ``partition_date``
partitions (2026-10-01 … 2026-10-04). Columns: ``id BIGINT, partition_date DATE, value DOUBLE
(random), payload VARCHAR (md5), user_id INTEGER``; the files carry Iceberg field ids 1…5, as
every Iceberg writer's files do (pyiceberg's ``add_files`` accepts them and uses the ids).

Each method then gets a FRESH copy of those files (copied, not linked) in its own directory,
registered as a table of its kind, and compacts all of it (untimed setup, timed compaction and
untimed validation each run in a subprocess of their own, so peak RSS is per method):

1. **lakehouse**: a pyiceberg ``SqlCatalog`` (sqlite, catalog name ``default``) table ``ns.t``,
   identity-partitioned on ``partition_date``, the copies registered with ``table.add_files``;
   timed: ``lakehouse_compact('ns.t', catalog_uri := …, small_file_threshold_mb := 64,
   target_file_size_mb := 128)``.
2. **delta-rs**: ``deltalake.convert_to_deltalake(dir, partition_by=…, partition_strategy='hive')``
   of copies of the same files *without* the ``partition_date`` column (Hive/Delta layout keeps
   partition values in the path only; convert refuses files that also hold the column). That
   variant is derived once from the source set by DuckDB with the same row groups per file.
   Timed: ``DeltaTable(path).optimize.compact(target_size=128 MiB)`` (delta-rs defaults:
   ZSTD, all cores).
3. **pyiceberg**: a second table like (1); timed: per partition
   ``tbl.scan(row_filter=EqualTo('partition_date', d)).to_arrow()`` then
   ``tbl.overwrite(arrow, overwrite_filter=EqualTo('partition_date', d))``.
4. **spark**: Apache Spark's own compaction on a table like (1) (registered by pyiceberg under the
   catalog name ``sparkbench`` in the same kind of sqlite catalog, which Iceberg's JDBC catalog
   reads): PySpark 4.0.1 + Iceberg 1.10.1 in ``local[2]`` (the same two cores DuckDB uses),
   timed: ``CALL sparkbench.system.rewrite_data_files(table => 'ns.t', options =>
   map('target-file-size-bytes', <128 MiB>))`` with Spark's defaults otherwise. The JVM and
   SparkSession start is measured apart and not included; peak RSS adds the driver JVM's VmHWM.
5. **lakehouse-delta**: the Delta table of (2), same files; timed: ``lakehouse_compact('<path>',
   small_file_threshold_mb := 64, target_file_size_mb := 128)`` (one OPTIMIZE commit).
6. **spark-delta**: the Delta table of (2), same files; PySpark 4.0.1 + Delta Lake 4.0.0 in
   ``local[2]``, timed: ``OPTIMIZE delta.`<path>``` with ``spark.databricks.delta.optimize.maxFileSize``
   = 128 MiB and ``minFileSize`` = 64 MiB (our target and small-file threshold; Delta's defaults are
   1 GiB and 1 GiB) and Delta's defaults otherwise (Snappy). JVM start excluded, as for (4).
7. **lakehouse-spark-delta**: the Delta table of (2); ``lakehouse_compact('<path>', executor :=
   'spark', …)`` with a Spark Connect server (PySpark 4.0.1 + Delta Lake 4.0.0, ``local[2]``, the
   spark-delta method's JVM settings): one ``OPTIMIZE … WHERE`` for the degraded partitions.
   Server start excluded, as for (4).
8. **floor**: bare DuckDB, no metadata at all: per partition
   ``COPY (SELECT * FROM read_parquet([<its files>])) TO '<out>/<d>.parquet' (FORMAT parquet,
   COMPRESSION zstd)`` on one fresh connection.

Before each timed run the parent calls ``sync`` so the setup's copies are not written back
during the timing (their pages stay cached: every method reads warm inputs). Seconds are
wall-clock seconds of the compaction call only (the child has already imported its
libraries; DuckDB connect + LOAD are included for lakehouse and floor, ``DeltaTable(path)`` for
delta-rs, ``load_table`` for pyiceberg). Peak RSS is the child's ``VmHWM`` (so it includes the
Python interpreter and the method's imports; the RSS just before the timed call is shown too).
MiB/s is the MiB of input files the method rewrote divided by its seconds.

Validation after each run: the table read back through its own reader (pyiceberg scan, delta-rs
dataset, the floor's output files) must give the source's row count, per-partition row counts
and column checksums (sum of id and user_id, sum of value, non-null counts, min/max payload);
files per partition before/after; sizes of the new files.

Results are printed and written to ``bench/results/compact.md``. The extension comes from
``--extension``, else ``$LAKEHOUSE_EXTENSION``, else ``build/release/lakehouse.duckdb_extension``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Iterable

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT / "bench"))
import benchlib  # noqa: E402
from benchlib import GIB, MIB, catalog_uri, compact_result_table, extension_path, fetch_dicts  # noqa: E402
from benchlib import five_column_schema, fmt_spread, iceberg_files, lakehouse_connection, machine  # noqa: E402
from benchlib import per_partition_counts, proc_status_kib, quote, quote_list, register_files, run_methods  # noqa: E402
from benchlib import selected_methods, size_spread, snapshot_operation, write_report  # noqa: E402

DEFAULT_DIR = "/tmp/lakehouse-bench-compact"
DEFAULT_OUTPUT = REPO_ROOT / "bench" / "results" / "compact.md"

DATES = ["2026-10-01", "2026-10-02", "2026-10-03", "2026-10-04"]
NAMESPACE, TABLE_NAME, CATALOG_NAME = "ns", "t", "default"
SMALL_FILE_THRESHOLD_MB = 64
TARGET_FILE_SIZE_MB = 128
ROW_ALIGN = 2048  # DuckDB rounds ROW_GROUP_SIZE to a multiple of its vector size
SOURCE_VERSION = 1  # bump when the generated data changes
METHODS = ["lakehouse", "pyiceberg", "spark", "lakehouse-spark", "lakehouse-delta", "delta-rs", "spark-delta",
           "lakehouse-spark-delta", "floor"]
# Each method's table format; ratios compare a method with lakehouse on the same format.
FORMAT = {"lakehouse": "iceberg", "pyiceberg": "iceberg", "spark": "iceberg", "lakehouse-spark": "iceberg", "floor": "iceberg",
          "lakehouse-delta": "delta", "delta-rs": "delta", "spark-delta": "delta", "lakehouse-spark-delta": "delta"}
OURS = {"iceberg": "lakehouse", "delta": "lakehouse-delta"}
# Spark's JDBC catalog (sqlite) names its rows by the Spark catalog's name: the spark method's
# table is registered by pyiceberg under this catalog name, in the same kind of sqlite database.
SPARK_CATALOG = "sparkbench"
SPARK_DRIVER_MEMORY = "4g"
FIELD_IDS = "{id: 1, partition_date: 2, value: 3, payload: 4, user_id: 5}"

# their seconds / ours (on the same format) must be at least this
TARGETS = {"delta-rs": 2.0, "pyiceberg": 5.0, "spark": 5.0, "spark-delta": 2.0}
FLOOR_OVERHEAD_TARGET = 0.15
SPARK_HANDOFF_TARGET = 1.2  # our Spark executor's median / Spark's own call's median must be at most this  # (ours - floor) / floor must be at most this


# --------------------------------------------------------------------------- small helpers


def parquet_files(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.parquet"), key=lambda p: (len(p.name), p.name))


def copy_tree_files(files: dict[str, list[str]], src_root: Path, dst_root: Path) -> dict[str, list[str]]:
    """Copies ``files`` (per partition, relative to ``src_root``) under ``dst_root``; returns absolute paths."""
    out: dict[str, list[str]] = {}
    for date, rels in files.items():
        for rel in rels:
            dst = dst_root / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src_root / rel, dst)
            out.setdefault(date, []).append(str(dst))
    return out


# --------------------------------------------------------------------------- checksums


class Checksum:
    """Order-independent checksums of a stream of record batches with the benchmark's columns."""

    def __init__(self) -> None:
        self.rows = 0
        self.by_partition: dict[str, int] = {}
        self.sum_id = 0
        self.sum_user_id = 0
        self.sum_value = 0.0
        self.non_null = {name: 0 for name in ("id", "partition_date", "value", "payload", "user_id")}
        self.min_payload: str | None = None
        self.max_payload: str | None = None

    def add(self, batch: Any, partition: str | None = None) -> None:
        import pyarrow.compute as pc

        if batch.num_rows == 0:
            return
        self.rows += batch.num_rows
        names = batch.schema.names
        for name in self.non_null:
            if name in names:
                column = batch.column(names.index(name))
                self.non_null[name] += len(column) - column.null_count
            elif name == "partition_date" and partition is not None:
                self.non_null[name] += batch.num_rows
        self.sum_id += pc.sum(batch.column(names.index("id"))).as_py() or 0
        self.sum_user_id += pc.sum(batch.column(names.index("user_id")).cast("int64")).as_py() or 0
        self.sum_value += pc.sum(batch.column(names.index("value"))).as_py() or 0.0
        payload = batch.column(names.index("payload"))
        lo, hi = pc.min_max(payload).values()
        for value, attr, better in ((lo.as_py(), "min_payload", min), (hi.as_py(), "max_payload", max)):
            if value is not None:
                current = getattr(self, attr)
                setattr(self, attr, value if current is None else better(current, value))
        if "partition_date" in names:
            counts = pc.value_counts(batch.column(names.index("partition_date")))
            for item in counts.to_pylist():
                key = item["values"].isoformat() if item["values"] is not None else "null"
                self.by_partition[key] = self.by_partition.get(key, 0) + item["counts"]
        elif partition is not None:
            self.by_partition[partition] = self.by_partition.get(partition, 0) + batch.num_rows

    def as_dict(self) -> dict[str, Any]:
        return {
            "rows": self.rows,
            "rows_by_partition": dict(sorted(self.by_partition.items())),
            "sum_id": self.sum_id,
            "sum_user_id": self.sum_user_id,
            "sum_value": self.sum_value,
            "non_null": self.non_null,
            "min_payload": self.min_payload,
            "max_payload": self.max_payload,
        }


def compare_checksums(got: dict[str, Any], want: dict[str, Any]) -> list[str]:
    """Differences between two checksum dicts (empty when they agree)."""
    problems = []
    for key in ("rows", "rows_by_partition", "sum_id", "sum_user_id", "non_null", "min_payload", "max_payload"):
        if got[key] != want[key]:
            problems.append(f"{key}: got {got[key]!r}, source {want[key]!r}")
    if not math.isclose(got["sum_value"], want["sum_value"], rel_tol=1e-9, abs_tol=1e-6):
        problems.append(f"sum_value: got {got['sum_value']!r}, source {want['sum_value']!r}")
    return problems


def checksum_files(files: Iterable[str | Path], partition_of: Any = None) -> dict[str, Any]:
    import pyarrow.parquet as pq

    check = Checksum()
    for path in files:
        partition = partition_of(path) if partition_of else None
        for batch in pq.ParquetFile(str(path)).iter_batches(batch_size=65536):
            check.add(batch, partition)
    return check.as_dict()


# --------------------------------------------------------------------------- source data


def write_partition(con: Any, target: Path, query: str, rows_per_file: int, field_ids: bool) -> None:
    """One COPY, one row group per file (single-threaded, so every file gets exactly one group)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    options = f"FORMAT parquet, ROW_GROUP_SIZE {rows_per_file}, ROW_GROUPS_PER_FILE 1"
    if field_ids:
        options += f", FIELD_IDS {FIELD_IDS}"
    con.execute(f"COPY ({query}) TO {quote(str(target))} ({options})")
    # With ROW_GROUPS_PER_FILE DuckDB leaves a trailing file without rows; it is no data file.
    for path in parquet_files(target):
        if con.execute(f"SELECT sum(num_rows) FROM parquet_file_metadata({quote(str(path))})").fetchone()[0] == 0:
            path.unlink()


def generated(offset: int, rows: int, date: str) -> str:
    return (
        f"SELECT ({offset} + i)::BIGINT AS id, DATE '{date}' AS partition_date, random() AS value, "
        f"md5(({offset} + i)::VARCHAR) AS payload, (hash({offset} + i) % 1000000)::INTEGER AS user_id "
        f"FROM range(0, {rows}) t(i) ORDER BY i"
    )


def plan_source(gb: float, files: int) -> dict[str, int]:
    """Rows per file and file count for ``gb`` GiB in at least ``files`` files, from a calibration write."""
    import duckdb

    probe = Path(f"/tmp/lakehouse-bench-compact-probe-{os.getpid()}")
    shutil.rmtree(probe, ignore_errors=True)
    con = duckdb.connect()
    con.execute("SET threads = 1")
    try:
        sample_rows = 4096
        write_partition(con, probe, generated(0, sample_rows * 16, DATES[0]), sample_rows, True)
        sizes = [p.stat().st_size for p in parquet_files(probe)]
        bytes_per_row = sum(sizes) / (sample_rows * len(sizes))
    finally:
        con.close()
        shutil.rmtree(probe, ignore_errors=True)
    want_bytes = gb * GIB
    per_file = want_bytes / files
    rows_per_file = max(ROW_ALIGN, round(per_file / bytes_per_row / ROW_ALIGN) * ROW_ALIGN)
    est_file = rows_per_file * bytes_per_row
    count = max(files, math.ceil(want_bytes * 1.01 / est_file))
    count = math.ceil(count / len(DATES)) * len(DATES)
    return {"rows_per_file": rows_per_file, "files": count, "bytes_per_row_estimate": round(bytes_per_row, 2)}


def build_source(bench_dir: Path, gb: float, files: int, rebuild: bool) -> dict[str, Any]:
    """Writes (or reuses) the source set and its Delta variant; returns the manifest."""
    import duckdb

    marker = bench_dir / "source.json"
    params = {"gb": gb, "files": files, "version": SOURCE_VERSION}
    if marker.is_file() and not rebuild:
        manifest = json.loads(marker.read_text())
        if manifest.get("params") == params and all(
            (bench_dir / variant / rel).is_file() for variant in ("source", "delta_source") for rels in manifest[variant]["files"].values() for rel in rels
        ):
            print(f"using cached source data in {bench_dir} ({manifest['source']['file_count']} files, "
                  f"{manifest['source']['bytes'] / MIB:.1f} MiB)")
            return manifest
    marker.unlink(missing_ok=True)
    for stale in ("source", "delta_source"):
        shutil.rmtree(bench_dir / stale, ignore_errors=True)
    bench_dir.mkdir(parents=True, exist_ok=True)

    plan = plan_source(gb, files)
    rows_per_file, count = plan["rows_per_file"], plan["files"]
    per_partition = count // len(DATES)
    print(f"writing source data: {count} files × {rows_per_file} rows over {len(DATES)} partitions "
          f"(~{plan['bytes_per_row_estimate']} B/row) …")
    started = time.perf_counter()
    con = duckdb.connect()
    con.execute("SET threads = 1")
    con.execute("SELECT setseed(0.42)")
    for n, date in enumerate(DATES):
        rows = per_partition * rows_per_file
        write_partition(con, bench_dir / "source" / f"partition_date={date}", generated(n * rows, rows, date), rows_per_file, True)
    # The Delta variant: same rows, same row group per file, no partition column inside the files.
    for date in DATES:
        src = [str(p) for p in parquet_files(bench_dir / "source" / f"partition_date={date}")]
        listing = quote_list(src)
        write_partition(
            con,
            bench_dir / "delta_source" / f"partition_date={date}",
            f"SELECT * EXCLUDE (partition_date) FROM read_parquet({listing}) ORDER BY id",
            rows_per_file,
            False,
        )
    con.close()
    build_seconds = time.perf_counter() - started

    manifest: dict[str, Any] = {"params": params, "plan": plan, "rows_per_file": rows_per_file, "build_seconds": round(build_seconds, 1)}
    for variant in ("source", "delta_source"):
        root = bench_dir / variant
        listing = {date: [str(p.relative_to(root)) for p in parquet_files(root / f"partition_date={date}")] for date in DATES}
        sizes = [(root / rel).stat().st_size for rels in listing.values() for rel in rels]
        manifest[variant] = {
            "files": listing,
            "file_count": len(sizes),
            "bytes": sum(sizes),
            "sizes": size_spread(sizes),
        }
    print("checksumming the source …")
    manifest["checksums"] = checksum_files(bench_dir / "source" / rel for rels in manifest["source"]["files"].values() for rel in rels)
    manifest["delta_checksums"] = checksum_files(
        (bench_dir / "delta_source" / rel for rels in manifest["delta_source"]["files"].values() for rel in rels),
        partition_of=lambda p: Path(p).parent.name.split("=", 1)[1],
    )
    problems = compare_checksums(manifest["delta_checksums"], manifest["checksums"])
    if problems or manifest["delta_source"]["file_count"] != manifest["source"]["file_count"]:
        raise SystemExit(f"the Delta variant differs from the source: {problems}")
    marker.write_text(json.dumps(manifest, indent=2))
    return manifest


def check_source(manifest: dict[str, Any], gb: float, files: int) -> list[str]:
    """Prints the totals; returns failed requirements."""
    src = manifest["source"]
    sizes = src["sizes"]
    print(f"source: {src['file_count']} files, {src['bytes'] / MIB:.1f} MiB ({src['bytes'] / GIB:.3f} GiB), "
          f"{manifest['checksums']['rows']:,} rows, file sizes {sizes['min_mib'] * 1024:.0f}/"
          f"{sizes['median_mib'] * 1024:.0f}/{sizes['max_mib'] * 1024:.0f} KiB (min/median/max); "
          f"rows per partition {manifest['checksums']['rows_by_partition']}")
    failed = []
    if src["file_count"] < files:
        failed.append(f"only {src['file_count']} files (want ≥ {files})")
    if src["bytes"] < gb * GIB:
        failed.append(f"only {src['bytes'] / GIB:.3f} GiB (want ≥ {gb})")
    if sizes["max_mib"] >= SMALL_FILE_THRESHOLD_MB / 4:
        failed.append(f"largest file {sizes['max_mib']:.1f} MiB is not well under {SMALL_FILE_THRESHOLD_MB} MiB")
    if len(src["files"]) != len(DATES) or any(not v for v in src["files"].values()):
        failed.append("not every partition has files")
    return failed


# --------------------------------------------------------------------------- per-method work (children)


def sql_catalog(workdir: Path, name: str = CATALOG_NAME) -> Any:
    return benchlib.sql_catalog(name, workdir, workdir / "warehouse")


def table_dir(workdir: Path) -> Path:
    return workdir / "warehouse" / f"{NAMESPACE}.db" / TABLE_NAME


def setup_iceberg(workdir: Path, bench_dir: Path, manifest: dict[str, Any], catalog_name: str = CATALOG_NAME) -> dict[str, Any]:
    """Copies the source files into a new table's data directory and registers them with add_files."""
    data = table_dir(workdir) / "data"
    started = time.perf_counter()
    copies = copy_tree_files(manifest["source"]["files"], bench_dir / "source", data)
    copied = time.perf_counter()
    table = register_files(sql_catalog(workdir, catalog_name), NAMESPACE, TABLE_NAME, five_column_schema(), "partition_date",
                           table_dir(workdir), [f"file://{p}" for paths in copies.values() for p in paths])
    files = iceberg_files(table, "partition_date")
    return {
        "copy_seconds": round(copied - started, 1),
        "register_seconds": round(time.perf_counter() - copied, 1),
        "input_bytes": sum(f["size"] for f in files),
        "files_before": per_partition_counts(files),
        "metadata_location": table.metadata_location,
    }


def run_lakehouse(workdir: Path, extension: str, delta: bool = False) -> dict[str, Any]:
    """lakehouse_compact on the Iceberg table (by name in the sqlite catalog) or the Delta table (by path)."""
    table = quote(str(workdir / "delta")) if delta else f"{quote(f'{NAMESPACE}.{TABLE_NAME}')}, catalog_uri := {quote(catalog_uri(workdir))}"
    return timed_compact(extension, table)


def timed_compact(extension: str, arguments: str) -> dict[str, Any]:
    """``lakehouse_compact(<arguments>, <threshold>, <target>)`` on a fresh connection (connect and
    LOAD timed), with the RSS before it."""
    baseline = proc_status_kib("VmRSS")
    cpu_before = benchlib.thread_cpu()
    started = time.perf_counter()
    con = lakehouse_connection(extension)
    rows = fetch_dicts(con.execute(
        f"SELECT * FROM lakehouse_compact({arguments}, "
        f"small_file_threshold_mb := {SMALL_FILE_THRESHOLD_MB}, target_file_size_mb := {TARGET_FILE_SIZE_MB})"
    ))
    seconds = time.perf_counter() - started
    busiest = benchlib.busiest_threads(cpu_before, benchlib.thread_cpu())
    con.close()
    return {"seconds": seconds, "baseline_rss_kib": baseline, "result_rows": rows, "busiest_threads": busiest}


def run_pyiceberg(workdir: Path) -> dict[str, Any]:
    from pyiceberg.expressions import EqualTo

    baseline = proc_status_kib("VmRSS")
    started = time.perf_counter()
    table = sql_catalog(workdir).load_table(f"{NAMESPACE}.{TABLE_NAME}")
    rows = 0
    for date in DATES:
        arrow = table.scan(row_filter=EqualTo("partition_date", date)).to_arrow()
        rows += arrow.num_rows
        table.overwrite(arrow, overwrite_filter=EqualTo("partition_date", date))
        del arrow
    seconds = time.perf_counter() - started
    return {"seconds": seconds, "baseline_rss_kib": baseline, "rows_rewritten": rows}


def setup_shared_catalog(workdir: Path, bench_dir: Path, manifest: dict[str, Any]) -> dict[str, Any]:
    """The spark method's table, in a sqlite catalog a Spark Connect server can share with the
    extension: Java's V0 catalog schema first (test/integration/spark_connect.py explains why)."""
    sys.path.insert(0, str(REPO_ROOT / "test" / "integration"))
    import spark_connect as scn

    workdir.mkdir(parents=True, exist_ok=True)
    import sqlite3

    con = sqlite3.connect(workdir / "catalog.db")
    with con:
        for statement in scn.JDBC_V0_SCHEMA:
            con.execute(statement)
    con.close()
    return setup_iceberg(workdir, bench_dir, manifest, SPARK_CATALOG)


def run_lakehouse_spark(workdir: Path, extension: str) -> dict[str, Any]:
    """lakehouse_compact with executor := 'spark': we plan, a Spark Connect server (PySpark 4.0.1 +
    Iceberg 1.10.1, local[2], the spark method's JVM settings) rewrites the degraded partitions in
    one rewrite_data_files call."""
    return timed_compact_on_spark(
        workdir,
        extension,
        f"{quote(f'{NAMESPACE}.{TABLE_NAME}')}, catalog := {quote(SPARK_CATALOG)}, catalog_uri := "
        f"{quote(catalog_uri(workdir))}",
    )


def run_lakehouse_spark_delta(workdir: Path, extension: str) -> dict[str, Any]:
    """lakehouse_compact with executor := 'spark' on the Delta table: we plan, a Spark Connect
    server (PySpark 4.0.1 + Delta Lake 4.0.0, local[2], the spark-delta method's JVM settings) runs
    one ``OPTIMIZE delta.`<path>` WHERE (<partition>) OR …`` for the degraded partitions, its
    session set to our target and threshold first."""
    return timed_compact_on_spark(workdir, extension, quote(str(workdir / "delta")))


def timed_compact_on_spark(workdir: Path, extension: str, table: str) -> dict[str, Any]:
    """``lakehouse_compact(<table>, executor := 'spark', …)`` against a Spark Connect server of
    its own (PySpark 4.0.1 with Iceberg's and Delta's jars and extensions). The server's start is
    excluded (reported apart); its JVM's peak RSS is added."""
    sys.path.insert(0, str(REPO_ROOT / "test" / "integration"))
    import spark_connect as scn

    jvm_started = time.perf_counter()
    server = scn.start_server(workdir, SPARK_CATALOG, driver_memory=SPARK_DRIVER_MEMORY, quick_jvm=False)
    jvm_seconds = time.perf_counter() - jvm_started
    try:
        out = timed_compact(extension, f"{table}, executor := 'spark', spark_remote := {quote(server.url)}")
        out["jvm_peak_rss_kib"] = proc_status_kib("VmHWM", server.pid)
    finally:
        server.stop()
    return out | {"jvm_seconds": jvm_seconds}


def spark_session(workdir: Path, delta: bool = False) -> tuple[Any, float]:
    """A local[2] SparkSession (Iceberg runtime from the jar cache) with the JDBC catalog
    SPARK_CATALOG on the method's sqlite catalog, and with ``delta`` Delta Lake (tables by path,
    OPTIMIZE bounded by our target); returns it and the seconds the JVM took."""
    sys.path.insert(0, str(REPO_ROOT / "test" / "integration"))
    import spark as sp

    builder = sp.session_builder(
        workdir / "spark-scratch", "lakehouse-bench-compact", driver_memory=SPARK_DRIVER_MEMORY, quick_jvm=False, delta=delta
    )
    if delta:
        builder = (
            builder.config("spark.databricks.delta.optimize.maxFileSize", str(TARGET_FILE_SIZE_MB * MIB))
            .config("spark.databricks.delta.optimize.minFileSize", str(SMALL_FILE_THRESHOLD_MB * MIB))
        )
    prefix = f"spark.sql.catalog.{SPARK_CATALOG}"
    builder = (
        builder.config(prefix, "org.apache.iceberg.spark.SparkCatalog")
        .config(f"{prefix}.type", "jdbc")
        .config(f"{prefix}.uri", f"jdbc:sqlite:{workdir}/catalog.db")
        .config(f"{prefix}.warehouse", f"file://{workdir}/warehouse")
    )
    started = time.perf_counter()
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session, time.perf_counter() - started


def jvm_peak_rss_kib(session: Any) -> int:
    """VmHWM of the Spark driver JVM (a child process of this Python)."""
    return proc_status_kib("VmHWM", session._jvm.java.lang.ProcessHandle.current().pid())


def run_spark(workdir: Path) -> dict[str, Any]:
    """Spark's own compaction, `rewrite_data_files` (bin-pack), with its defaults and our target."""
    session, jvm_seconds = spark_session(workdir)
    baseline = proc_status_kib("VmRSS")
    started = time.perf_counter()
    row = session.sql(
        f"CALL {SPARK_CATALOG}.system.rewrite_data_files(table => '{NAMESPACE}.{TABLE_NAME}', "
        f"options => map('target-file-size-bytes', '{TARGET_FILE_SIZE_MB * MIB}'))"
    ).collect()[0]
    seconds = time.perf_counter() - started
    table = session._jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(
        session._jsparkSession, f"{SPARK_CATALOG}.{NAMESPACE}.{TABLE_NAME}"
    )
    out = {
        "seconds": seconds,
        "jvm_seconds": jvm_seconds,
        "baseline_rss_kib": baseline,
        "jvm_peak_rss_kib": jvm_peak_rss_kib(session),
        "metrics": row.asDict(),
        "metadata_location": table.operations().current().metadataFileLocation(),
    }
    session.stop()
    return out


def run_spark_delta(workdir: Path) -> dict[str, Any]:
    """Spark's own Delta compaction, ``OPTIMIZE`` (bin-pack), bounded by our target and threshold."""
    session, jvm_seconds = spark_session(workdir, delta=True)
    baseline = proc_status_kib("VmRSS")
    started = time.perf_counter()
    row = session.sql(f"OPTIMIZE delta.`{workdir / 'delta'}`").collect()[0]
    seconds = time.perf_counter() - started
    metrics = row["metrics"].asDict(recursive=True) if row["metrics"] is not None else {}
    out = {
        "seconds": seconds,
        "jvm_seconds": jvm_seconds,
        "baseline_rss_kib": baseline,
        "jvm_peak_rss_kib": jvm_peak_rss_kib(session),
        "metrics": {k: metrics.get(k) for k in ("numFilesAdded", "numFilesRemoved", "numBatches", "totalConsideredFiles")},
    }
    session.stop()
    return out


def setup_delta(workdir: Path, bench_dir: Path, manifest: dict[str, Any]) -> dict[str, Any]:
    from deltalake import DeltaTable, Field, Schema, convert_to_deltalake

    path = workdir / "delta"
    started = time.perf_counter()
    copy_tree_files(manifest["delta_source"]["files"], bench_dir / "delta_source", path)
    copied = time.perf_counter()
    convert_to_deltalake(str(path), partition_by=Schema([Field("partition_date", "date")]), partition_strategy="hive")
    files = delta_files(DeltaTable(str(path)))
    return {
        "copy_seconds": round(copied - started, 1),
        "register_seconds": round(time.perf_counter() - copied, 1),
        "input_bytes": sum(f["size"] for f in files),
        "files_before": per_partition_counts(files),
    }


def delta_files(table: Any) -> list[dict[str, Any]]:
    import pyarrow as pa

    actions = pa.table(table.get_add_actions(flatten=True))
    out = []
    for row in actions.to_pylist():
        value = row.get("partition.partition_date")
        out.append({
            "path": row["path"],
            "size": row["size_bytes"],
            "partition": value.isoformat() if hasattr(value, "isoformat") else str(value),
            "rows": row.get("num_records"),
        })
    return out


def run_delta(workdir: Path) -> dict[str, Any]:
    from deltalake import DeltaTable

    baseline = proc_status_kib("VmRSS")
    started = time.perf_counter()
    table = DeltaTable(str(workdir / "delta"))
    metrics = table.optimize.compact(target_size=TARGET_FILE_SIZE_MB * MIB)
    seconds = time.perf_counter() - started
    return {"seconds": seconds, "baseline_rss_kib": baseline, "metrics": metrics}


def setup_floor(workdir: Path, bench_dir: Path, manifest: dict[str, Any]) -> dict[str, Any]:
    started = time.perf_counter()
    copies = copy_tree_files(manifest["source"]["files"], bench_dir / "source", workdir / "in")
    (workdir / "inputs.json").write_text(json.dumps(copies))
    return {
        "copy_seconds": round(time.perf_counter() - started, 1),
        "register_seconds": 0.0,
        "input_bytes": sum(os.path.getsize(p) for paths in copies.values() for p in paths),
        "files_before": {d: len(p) for d, p in sorted(copies.items())},
    }


def run_floor(workdir: Path) -> dict[str, Any]:
    import duckdb

    copies = json.loads((workdir / "inputs.json").read_text())
    out = workdir / "out"
    out.mkdir(parents=True, exist_ok=True)
    baseline = proc_status_kib("VmRSS")
    started = time.perf_counter()
    con = duckdb.connect()
    for date in DATES:
        listing = quote_list(copies[date])
        con.execute(
            f"COPY (SELECT * FROM read_parquet({listing})) TO {quote(str(out / f'{date}.parquet'))} (FORMAT parquet, COMPRESSION zstd)"
        )
    con.close()
    seconds = time.perf_counter() - started
    return {"seconds": seconds, "baseline_rss_kib": baseline}


def validate(method: str, workdir: Path, manifest: dict[str, Any], setup: dict[str, Any]) -> dict[str, Any]:
    """Reads the compacted table back with its own reader and compares with the source."""
    want = manifest["checksums"]
    result: dict[str, Any] = {}
    if method in ("lakehouse", "pyiceberg", "spark", "lakehouse-spark"):
        if method == "lakehouse-spark":
            table = sql_catalog(workdir, SPARK_CATALOG).load_table(f"{NAMESPACE}.{TABLE_NAME}")
        elif method == "spark":
            from pyiceberg.table import StaticTable

            run = json.loads((workdir / "run.json").read_text())
            table = StaticTable.from_metadata(run["metadata_location"])
        else:
            table = sql_catalog(workdir).load_table(f"{NAMESPACE}.{TABLE_NAME}")
        check = Checksum()
        for batch in table.scan().to_arrow_batch_reader():
            check.add(batch)
        got = check.as_dict()
        files = iceberg_files(table, "partition_date")
        source_names = {Path(p).name for rels in manifest["source"]["files"].values() for p in rels}
        new = [f for f in files if Path(f["path"]).name not in source_names]
        result["files_after"] = per_partition_counts(files)
        result["new_files"] = size_spread([f["size"] for f in new])
        result["new_file_rows"] = sum(f["rows"] for f in new)
        result["snapshot_operation"] = snapshot_operation(table)
        result["snapshots"] = len(table.metadata.snapshots)
        if new:
            import pyarrow.parquet as pq

            sample = pq.read_metadata(new[0]["path"].removeprefix("file://"))
            result["sample_new_file"] = {
                "field_ids": _field_ids(sample),
                "row_groups": sample.num_row_groups,
                "compression": sample.row_group(0).column(0).compression if sample.num_row_groups else None,
            }
    elif FORMAT[method] == "delta":
        from deltalake import DeltaTable

        table = DeltaTable(str(workdir / "delta"))
        check = Checksum()
        for batch in table.to_pyarrow_dataset().to_batches(batch_size=65536):
            check.add(batch)
        got = check.as_dict()
        files = delta_files(table)
        before = {Path(p).name for rels in manifest["delta_source"]["files"].values() for p in rels}
        new = [f for f in files if Path(f["path"]).name not in before]
        result["files_after"] = per_partition_counts(files)
        result["new_files"] = size_spread([f["size"] for f in new])
        result["table_version"] = table.version()
        result["last_operation"] = table.history(1)[0].get("operation")
    else:  # floor
        outputs = sorted((workdir / "out").glob("*.parquet"))
        got = checksum_files(outputs)
        result["files_after"] = {p.stem: 1 for p in outputs}
        result["new_files"] = size_spread([p.stat().st_size for p in outputs])
    result["checksums"] = got
    result["problems"] = compare_checksums(got, want)
    return result


def _field_ids(metadata: Any) -> dict[str, int | None]:
    """Parquet field ids of the top-level columns of a file."""
    schema = metadata.schema.to_arrow_schema()
    out = {}
    for field in schema:
        meta = field.metadata or {}
        raw = meta.get(b"PARQUET:field_id")
        out[field.name] = int(raw) if raw is not None else None
    return out


def child(args: argparse.Namespace) -> int:
    """One phase of one method, in its own process; writes ``<workdir>/<phase>.json``."""
    workdir = Path(args.workdir)
    bench_dir = Path(args.dir).resolve()
    manifest = json.loads((bench_dir / "source.json").read_text())
    method, phase = args.method, args.child
    if phase == "setup":
        if method == "spark":
            out = setup_iceberg(workdir, bench_dir, manifest, SPARK_CATALOG)
        elif method == "lakehouse-spark":
            out = setup_shared_catalog(workdir, bench_dir, manifest)
        else:
            setup = {"lakehouse": setup_iceberg, "pyiceberg": setup_iceberg, "delta-rs": setup_delta, "lakehouse-delta": setup_delta,
                     "spark-delta": setup_delta, "lakehouse-spark-delta": setup_delta, "floor": setup_floor}[method]
            out = setup(workdir, bench_dir, manifest)
    elif phase == "run":
        # Import the method's libraries before the timer starts (and before the baseline RSS).
        if method in ("lakehouse", "lakehouse-delta"):
            out = run_lakehouse(workdir, args.extension, delta=method == "lakehouse-delta")
        elif method == "pyiceberg":
            import pyiceberg.catalog.sql  # noqa: F401
            import pyiceberg.io.pyarrow  # noqa: F401

            out = run_pyiceberg(workdir)
        elif method == "delta-rs":
            import deltalake  # noqa: F401

            out = run_delta(workdir)
        elif method == "spark":
            out = run_spark(workdir)
        elif method == "lakehouse-spark":
            out = run_lakehouse_spark(workdir, args.extension)
        elif method == "spark-delta":
            out = run_spark_delta(workdir)
        elif method == "lakehouse-spark-delta":
            out = run_lakehouse_spark_delta(workdir, args.extension)
        else:
            out = run_floor(workdir)
        # Spark's work happens in its JVM, a child process: its peak is the JVM's (plus ours).
        out["peak_rss_kib"] = proc_status_kib("VmHWM") + out.get("jvm_peak_rss_kib", 0)
    else:
        setup = json.loads((workdir / "setup.json").read_text())
        out = validate(method, workdir, manifest, setup)
    (workdir / f"{phase}.json").write_text(json.dumps(out, indent=2, default=str))
    return 0


# --------------------------------------------------------------------------- parent


def run_phase(method: str, phase: str, workdir: Path, args: argparse.Namespace, extension: Path) -> dict[str, Any]:
    return benchlib.run_phase(__file__, method, phase, workdir, Path(args.dir).resolve(), extension, record_seconds=True)


def progress(phase: str, out: dict[str, Any], setup: dict[str, Any]) -> str:
    """What the parent prints after a phase."""
    if phase == "setup":
        return f"    copied in {out['copy_seconds']} s, registered in {out['register_seconds']} s; compacting …"
    if phase == "run":
        return (f"    {out['seconds']:.2f} s, {setup['input_bytes'] / MIB / out['seconds']:.1f} MiB/s, "
                f"peak RSS {out['peak_rss_kib'] / 1024:,.0f} MiB; validating …")
    status = "ok" if not out["problems"] else "MISMATCH: " + "; ".join(out["problems"])
    return f"    {out['checksums']['rows']:,} rows, files after {out['files_after']}, new files {fmt_spread(out['new_files'])}: {status}"


def fmt_counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{k[5:]}: {v}" for k, v in counts.items()) if counts else "–"


def versions() -> dict[str, str]:
    import deltalake
    import duckdb
    import pyarrow
    import pyiceberg

    try:
        import pyspark

        spark = pyspark.__version__
    except ImportError:
        spark = "not installed"
    return {"duckdb": duckdb.__version__, "pyiceberg": pyiceberg.__version__, "deltalake": deltalake.__version__,
            "pyarrow": pyarrow.__version__, "pyspark": spark}


def report(results: dict[str, list[dict[str, Any]]], manifest: dict[str, Any], facts: dict[str, Any]) -> str:
    import statistics

    times = {m: [r["run"]["seconds"] for r in runs] for m, runs in results.items()}
    # Medians everywhere (every run is listed below, and each method's slowest beside it).
    seconds = {m: statistics.median(t) for m, t in times.items()}
    worst = {m: max(t) for m, t in times.items()}
    best = {m: min(runs, key=lambda r: r["run"]["seconds"]) for m, runs in results.items()}
    ours = seconds.get("lakehouse")

    def ours_for(method: str) -> float | None:
        """lakehouse's seconds on the method's table format (the floor compares with Iceberg)."""
        return seconds.get(OURS[FORMAT[method]])

    src = manifest["source"]
    v = facts["versions"]
    lines = [
        "# Compaction benchmark",
        "",
        f"Data: {src['file_count']:,} Parquet files, {src['bytes'] / MIB:,.1f} MiB ({src['bytes'] / GIB:.2f} GiB), "
        f"{manifest['checksums']['rows']:,} rows in {len(DATES)} `partition_date` partitions; one row group of "
        f"{manifest['rows_per_file']:,} rows per file, {src['sizes']['min_mib'] * 1024:.0f} / {src['sizes']['median_mib'] * 1024:.0f} / "
        f"{src['sizes']['max_mib'] * 1024:.0f} KiB per file (min / median / max), written by DuckDB "
        "(Snappy) with Iceberg field ids. Every method compacts a fresh copy of these files "
        f"(the Delta methods: the same files without the partition column, {manifest['delta_source']['bytes'] / MIB:,.1f} MiB).",
        "",
        f"{facts['repeat']} run(s) per method, order-alternated (each attempt runs every method once), median "
        f"and slowest shown; {facts['when']}; {facts['machine']}; lakehouse extension: "
        f"`{facts['extension']}`; duckdb {v['duckdb']}, pyiceberg {v['pyiceberg']}, deltalake {v['deltalake']}, "
        f"pyarrow {v['pyarrow']}, pyspark {v.get('pyspark')}. Full run took {facts['total_minutes']:.1f} min including setup and validation.",
        "",
        "| method | format | median s | slowest s | MiB/s (median) | peak RSS MiB | RSS before MiB | their median / lakehouse's (same format) |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for method in results:
        r = best[method]
        mib = r["setup"]["input_bytes"] / MIB
        mine = ours_for(method)
        ratio = f"{seconds[method] / mine:.2f}×" if mine else "–"
        peak = max(x["run"]["peak_rss_kib"] for x in results[method]) / 1024
        kind = "none" if method == "floor" else FORMAT[method]
        lines.append(
            f"| {LABELS[method]} | {kind} | {seconds[method]:.2f} | {worst[method]:.2f} | {mib / seconds[method]:.1f} | {peak:,.0f} | "
            f"{r['run']['baseline_rss_kib'] / 1024:,.0f} | {ratio} |"
        )
    if facts["repeat"] > 1:
        lines += ["", "All runs (s): " + "; ".join(
            f"{LABELS[m]} " + ", ".join(f"{x['run']['seconds']:.2f}" for x in runs) for m, runs in results.items())]

    lines += ["", "## Targets", "", "| target | measured | met |", "|---|---:|:---:|"]
    for method, want in TARGETS.items():
        mine = seconds.get(OURS[FORMAT[method]])
        if method in seconds and mine:
            got = seconds[method] / mine
            lines.append(f"| ≥ {want:g}× faster than {LABELS[method]} | {got:.2f}× | {'yes' if got >= want else '**no**'} |")
    for on_spark, theirs in (("lakehouse-spark", "spark"), ("lakehouse-spark-delta", "spark-delta")):
        if on_spark in seconds and theirs in seconds:
            got = seconds[on_spark] / seconds[theirs]
            lines.append(
                f"| {LABELS[on_spark]} within {SPARK_HANDOFF_TARGET}× {LABELS[theirs]} on the whole table (medians; our "
                f"slowest {worst[on_spark] / seconds[theirs]:.2f}× their median) | {got:.2f}× | "
                f"{'yes' if got <= SPARK_HANDOFF_TARGET else '**no**'} |"
            )
    if ours:
        if "floor" in seconds:
            for label, mine in (("median", ours), ("slowest run", worst["lakehouse"])):
                overhead = (mine - seconds["floor"]) / seconds["floor"]
                lines.append(
                    f"| {label} within {FLOOR_OVERHEAD_TARGET:.0%} of the bare DuckDB COPY floor's median | {overhead:+.1%} | "
                    f"{'yes' if overhead <= FLOOR_OVERHEAD_TARGET else '**no**'} |"
                )

    lines += ["", "## Validation (last run of each method)", "",
              "| method | rows (source " + f"{manifest['checksums']['rows']:,}" + ") | rows & checksums equal | "
              "files before (per partition) | files after (per partition) | new files min / median / max |",
              "|---|---:|:---:|---|---|---|"]
    for method, runs in results.items():
        r = runs[-1]
        val = r["validate"]
        ok = "yes" if not val["problems"] else "**no**: " + "; ".join(val["problems"])
        lines.append(
            f"| {LABELS[method]} | {val['checksums']['rows']:,} | {ok} | {fmt_counts(r['setup']['files_before'])} | "
            f"{fmt_counts(val['files_after'])} | {fmt_spread(val['new_files'])} |"
        )
    for method in ("lakehouse", "lakehouse-delta"):
        if method not in results:
            continue
        r = results[method][-1]
        rows = r["run"]["result_rows"]
        lines += ["", f"`lakehouse_compact` on the {FORMAT[method].capitalize()} table returned:", ""] + compact_result_table(rows)
        val = r["validate"]
        extra = (f"snapshot operation `{val.get('snapshot_operation')}`" if method == "lakehouse"
                 else f"version {val.get('table_version')}, operation `{val.get('last_operation')}`")
        if val.get("sample_new_file"):
            s = val["sample_new_file"]
            extra += f"; a new file: {s['row_groups']} row group(s), {s['compression']}, field ids {s['field_ids']}"
        lines += ["", f"Lakehouse output: {fmt_spread(val['new_files'])}; {extra}."]
    if "spark" in results:
        r = results["spark"][-1]["run"]
        lines += ["", f"Spark `rewrite_data_files` returned {r['metrics']}; the JVM and SparkSession took "
                  f"{r['jvm_seconds']:.1f} s to start (not in its seconds above); its peak RSS is the driver JVM's "
                  f"VmHWM ({r['jvm_peak_rss_kib'] / 1024:,.0f} MiB, `spark.driver.memory={SPARK_DRIVER_MEMORY}`) plus the Python "
                  "process's."]
    if "spark-delta" in results:
        r = results["spark-delta"][-1]["run"]
        lines += ["", f"Spark Delta `OPTIMIZE` returned {r['metrics']}; the JVM took {r['jvm_seconds']:.1f} s to start "
                  f"(not in its seconds above); peak RSS {r['jvm_peak_rss_kib'] / 1024:,.0f} MiB (driver JVM) plus the Python process's."]
    for method, call, commits in (("lakehouse-spark", "`rewrite_data_files` call", "Spark snapshot"),
                                  ("lakehouse-spark-delta", "`OPTIMIZE … WHERE` (Delta)", "Delta version")):
        if method not in results:
            continue
        r = results[method][-1]["run"]
        sent = [row for row in r["result_rows"] if row.get("executor") == "spark"]
        lines += ["", f"{LABELS[method]}: {len(sent)} partition(s) planned here and rewritten by Spark in one {call} "
                  f"({commits} {', '.join(sorted({str(row['snapshot_id']) for row in sent}))}); the Spark Connect server "
                  f"took {r['jvm_seconds']:.1f} s to start (not in its seconds above); its JVM's peak RSS "
                  f"{r['jvm_peak_rss_kib'] / 1024:,.0f} MiB is in the peak RSS. CPU of our process's busiest threads "
                  "during each run (`main`: DuckDB's client thread): " + "; ".join(
                      f"{x['run']['seconds']:.1f} s run: {', '.join(x['run'].get('busiest_threads', []))}"
                      for x in results[method]) + "."]
    if "delta-rs" in results:
        m = results["delta-rs"][-1]["run"]["metrics"]
        lines += ["", f"delta-rs optimize metrics: files added {m.get('numFilesAdded')}, removed {m.get('numFilesRemoved')}, "
                  f"batches {m.get('numBatches')}."]
    lines += ["", "## Methods", ""] + [f"- **{LABELS[m]}**: {WHAT[m]}" for m in results]
    lines += ["", "Setup (untimed): " + "; ".join(
        f"{LABELS[m]} copy {runs[-1]['setup']['copy_seconds']} s + register {runs[-1]['setup']['register_seconds']} s"
        for m, runs in results.items()) + ".", ""]
    return "\n".join(lines)


LABELS = {"lakehouse": "lakehouse_compact", "delta-rs": "delta-rs optimize.compact", "pyiceberg": "pyiceberg scan + overwrite",
          "spark": "Spark rewrite_data_files", "lakehouse-spark": "lakehouse_compact, executor := 'spark'",
          "lakehouse-delta": "lakehouse_compact (Delta)", "spark-delta": "Spark Delta OPTIMIZE",
          "lakehouse-spark-delta": "lakehouse_compact (Delta), executor := 'spark'",
          "floor": "floor: bare DuckDB COPY"}
WHAT = {
    "lakehouse": f"pyiceberg `SqlCatalog` table, files registered with `add_files`; `lakehouse_compact('ns.t', catalog_uri := …, "
                 f"small_file_threshold_mb := {SMALL_FILE_THRESHOLD_MB}, target_file_size_mb := {TARGET_FILE_SIZE_MB})` "
                 "(DuckDB connect + LOAD included).",
    "delta-rs": "`convert_to_deltalake(…, partition_strategy='hive')` of the copies (no partition column in the files); "
                f"`DeltaTable(path).optimize.compact(target_size={TARGET_FILE_SIZE_MB} MiB)` with delta-rs defaults (ZSTD).",
    "pyiceberg": "same kind of table as lakehouse; per partition `tbl.scan(row_filter=EqualTo('partition_date', d)).to_arrow()` "
                 "then `tbl.overwrite(arrow, overwrite_filter=EqualTo(…))` (load_table included).",
    "spark": f"same kind of table as lakehouse (registered by pyiceberg in the same kind of sqlite catalog, read by Spark's "
             f"JDBC catalog); PySpark 4.0.1 + Iceberg 1.10.1 in `local[2]` (the same two cores), `CALL {SPARK_CATALOG}.system."
             f"rewrite_data_files(table => 'ns.t', options => map('target-file-size-bytes', '{TARGET_FILE_SIZE_MB} MiB'))` "
             "with Spark's defaults otherwise (bin-pack, zstd); JVM start excluded and reported apart.",
    "lakehouse-spark": "the spark method's kind of table, in a sqlite catalog shared with a Spark Connect server (PySpark "
                       "4.0.1 + Iceberg 1.10.1, `local[2]`, the spark method's JVM settings); `lakehouse_compact('ns.t', "
                       f"catalog := '{SPARK_CATALOG}', executor := 'spark', spark_remote := 'sc://127.0.0.1:…', "
                       f"small_file_threshold_mb := {SMALL_FILE_THRESHOLD_MB}, target_file_size_mb := {TARGET_FILE_SIZE_MB})`: "
                       "planned here, one `rewrite_data_files(where => <partition>)` per degraded partition on Spark, each "
                       "commit checked; server start excluded and reported apart, its JVM's peak RSS added.",
    "lakehouse-delta": "the delta-rs method's table (same files, `convert_to_deltalake`); `lakehouse_compact('<path>', "
                       f"small_file_threshold_mb := {SMALL_FILE_THRESHOLD_MB}, target_file_size_mb := {TARGET_FILE_SIZE_MB})` "
                       "(DuckDB connect + LOAD included); one OPTIMIZE commit.",
    "spark-delta": "the delta-rs method's table; PySpark 4.0.1 + Delta Lake 4.0.0 in `local[2]`, `OPTIMIZE delta.`<path>`` "
                   f"with `spark.databricks.delta.optimize.maxFileSize` = {TARGET_FILE_SIZE_MB} MiB and `minFileSize` = "
                   f"{SMALL_FILE_THRESHOLD_MB} MiB, Delta's defaults otherwise (Snappy); JVM start excluded and reported apart.",
    "lakehouse-spark-delta": "the delta-rs method's table, and a Spark Connect server (PySpark 4.0.1 + Delta Lake 4.0.0, "
                             "`local[2]`, the spark-delta method's JVM settings); `lakehouse_compact('<path>', executor := "
                             "'spark', spark_remote := 'sc://127.0.0.1:…', small_file_threshold_mb := "
                             f"{SMALL_FILE_THRESHOLD_MB}, target_file_size_mb := {TARGET_FILE_SIZE_MB})`: planned here, one "
                             "`OPTIMIZE delta.`<path>` WHERE (<partition>) OR …` on Spark for the degraded partitions, its "
                             "commit checked; server start excluded and reported apart, its JVM's peak RSS added.",
    "floor": "per partition `COPY (SELECT * FROM read_parquet([<files>])) TO '<d>.parquet' (FORMAT parquet, COMPRESSION zstd)` "
             "on one fresh DuckDB connection; no metadata, one output file per partition.",
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default=DEFAULT_DIR, help=f"cache and work directory (default {DEFAULT_DIR})")
    parser.add_argument("--gb", type=float, default=1.0, help="minimum source size in GiB (default 1.0)")
    parser.add_argument("--files", type=int, default=5000, help="minimum number of source files (default 5000)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per method, each on a fresh copy, order-alternated (median and slowest are reported)")
    parser.add_argument("--methods", default=",".join(METHODS), help=f"comma-separated subset of {','.join(METHODS)}")
    parser.add_argument("--rebuild", action="store_true", help="rewrite the cached source data")
    parser.add_argument("--keep", action="store_true", help="keep each method's work directory after the run")
    parser.add_argument("--extension", help="lakehouse extension file")
    parser.add_argument("--output", default=str(DEFAULT_OUTPUT), help="markdown report path")
    parser.add_argument("--child", choices=["setup", "run", "validate"], help=argparse.SUPPRESS)
    parser.add_argument("--method", help=argparse.SUPPRESS)
    parser.add_argument("--workdir", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args)

    began = time.perf_counter()
    extension = extension_path(args.extension)
    methods = selected_methods(args.methods, METHODS, extension)
    bench_dir = Path(args.dir).resolve()
    manifest = build_source(bench_dir, args.gb, args.files, args.rebuild)
    failed = check_source(manifest, args.gb, args.files)
    if failed:
        raise SystemExit("source data does not meet the requirements: " + "; ".join(failed))

    # Every method on a fresh copy: the setup's copies are flushed (sync) before the timed run.
    results = run_methods(methods, args.repeat, bench_dir, args.keep,
                          lambda method, phase, workdir, _: run_phase(method, phase, workdir, args, extension), progress)

    facts = {
        "repeat": args.repeat,
        "when": dt.date.today().isoformat(),
        "machine": machine(),
        "extension": os.path.relpath(extension, REPO_ROOT),
        "versions": versions(),
        "total_minutes": (time.perf_counter() - began) / 60,
    }
    write_report(report(results, manifest, facts), args.output, bench_dir / "results.json", {"facts": facts, "results": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
