#!/usr/bin/env python3
"""Benchmark: profiling a many-file Iceberg table with lakehouse vs pyiceberg vs duckdb-iceberg.

Usage::

    .venv/bin/python bench/bench_profile.py [--dir /tmp/lakehouse-bench] [--rebuild]

The table is written once by ``lakehouse_demo(…, scale := 0.0001, file_multiplier := 120,
snapshots := 250)`` (≥ 20,000 data files in ≥ 200 manifests) and cached under ``--dir``
together with a sqlite pyiceberg ``SqlCatalog`` in which it is registered. Then three ways of
computing per-partition file counts are timed on that same table, ``--repeat`` runs each after
``--warmup`` untimed runs, each run on a fresh connection / freshly loaded table:

1. ``SELECT * FROM lakehouse_fragmentation(<metadata.json>, small_file_threshold_mb := 0.0064)``;
2. pyiceberg: ``catalog.load_table`` + ``table.inspect.files()`` + a pyarrow ``group_by`` on the
   partition (file count, summed sizes, small-file count);
3. DuckDB's iceberg extension: ``iceberg_metadata(<metadata.json>)`` grouped by the partition
   directory of ``file_path`` (it exposes no file sizes in 1.5.5);
4. Apache Spark (PySpark 4.0.1, Iceberg 1.10.1, ``local[2]``): the table's ``files`` metadata table
   grouped by partition, through Iceberg's JDBC catalog on the same sqlite catalog (cache off, so
   each run reloads the metadata); the JVM's start is reported apart, not timed (``--no-spark``
   leaves it out).

All must agree on the total data file count (and on the per-partition counts). A
markdown table with every run's time, the median, worst and best, and the ratios of medians
pyiceberg/lakehouse and duckdb-iceberg/lakehouse is printed and written to ``bench/results/profile.md``.

The extension comes from ``--extension``, else ``$LAKEHOUSE_EXTENSION``, else
``build/release/lakehouse.duckdb_extension`` when it exists, else ``build/debug/…``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import glob
import importlib.util
import json
import os
import platform
import statistics
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Callable

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyiceberg
from pyiceberg.catalog.sql import SqlCatalog

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DIR = "/tmp/lakehouse-bench"
DEFAULT_OUTPUT = REPO_ROOT / "bench" / "results" / "profile.md"

DEMO_PARAMS = {"scale": 0.0001, "file_multiplier": 120, "snapshots": 250}
SMALL_FILE_THRESHOLD_MB = 0.0064  # 64 MiB × scale, as lakehouse_demo reports it
MIN_DATA_FILES = 20_000
MIN_MANIFESTS = 200
NAMESPACE, TABLE_NAME = "bench", "profile"
MIB = 1024 * 1024


# --------------------------------------------------------------------------- setup


def extension_path(explicit: str | None) -> Path:
    """The lakehouse extension to benchmark."""
    if explicit or os.environ.get("LAKEHOUSE_EXTENSION"):
        path = Path(explicit or os.environ["LAKEHOUSE_EXTENSION"])
        return path if path.is_absolute() else REPO_ROOT / path
    release = REPO_ROOT / "build" / "release" / "lakehouse.duckdb_extension"
    return release if release.is_file() else REPO_ROOT / "build" / "debug" / "lakehouse.duckdb_extension"


def pip_extension_path(name: str) -> str:
    """``<name>.duckdb_extension`` from the ``duckdb-extension-<name>`` wheel (never INSTALL)."""
    spec = importlib.util.find_spec(f"duckdb_extension_{name}")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"python package duckdb-extension-{name} is not installed")
    for location in spec.submodule_search_locations:
        found = sorted(glob.glob(os.path.join(location, "extensions", "*", f"{name}.duckdb_extension")))
        if found:
            return found[-1]
    raise SystemExit(f"no {name}.duckdb_extension inside duckdb-extension-{name}")


def lakehouse_connection(extension: Path) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
    con.execute(f"LOAD '{extension}'")
    return con


def iceberg_connection() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
    con.execute(f"LOAD '{pip_extension_path('avro')}'")
    con.execute(f"LOAD '{pip_extension_path('iceberg')}'")
    return con


def quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def build_table(bench_dir: Path, extension: Path, rebuild: bool) -> dict[str, Any]:
    """Writes the demo table once; returns lakehouse_demo's row (cached in demo.json)."""
    marker = bench_dir / "demo.json"
    table_dir = bench_dir / "table"
    if marker.is_file() and not rebuild:
        demo = json.loads(marker.read_text())
        if Path(demo["metadata_location"]).is_file() and demo.get("params") == DEMO_PARAMS:
            print(f"using cached table {table_dir}")
            return demo
    # An unfinished or outdated build of ours: start over.
    for stale in (marker, bench_dir / "catalog.db"):
        stale.unlink(missing_ok=True)
    shutil.rmtree(table_dir, ignore_errors=True)
    bench_dir.mkdir(parents=True, exist_ok=True)
    params = ", ".join(f"{k} := {v}" for k, v in DEMO_PARAMS.items())
    print(f"writing lakehouse_demo({table_dir}, {params}) … (a few minutes)")
    started = time.perf_counter()
    con = lakehouse_connection(extension)
    cursor = con.execute(f"SELECT * FROM lakehouse_demo({quote(str(table_dir))}, {params})")
    names = [d[0] for d in cursor.description]
    demo = dict(zip(names, cursor.fetchone()))
    con.close()
    demo["params"] = DEMO_PARAMS
    demo["build_seconds"] = round(time.perf_counter() - started, 1)
    marker.write_text(json.dumps(demo, indent=2))
    return demo


def register_catalog(bench_dir: Path, metadata_location: str) -> SqlCatalog:
    """A sqlite SqlCatalog in which the table is registered as ``bench.profile``."""
    catalog = SqlCatalog("bench", uri=f"sqlite:///{bench_dir}/catalog.db", warehouse=f"file://{bench_dir}/warehouse")
    identifier = f"{NAMESPACE}.{TABLE_NAME}"
    if (NAMESPACE,) not in catalog.list_namespaces():
        catalog.create_namespace(NAMESPACE)
    if catalog.table_exists(identifier):
        if catalog.load_table(identifier).metadata_location.removeprefix("file://") != metadata_location:
            catalog.drop_table(identifier)
    if not catalog.table_exists(identifier):
        catalog.register_table(identifier, metadata_location)
    return catalog


def check_table(metadata: str) -> tuple[int, int]:
    """(data files, manifests) of the current snapshot, per duckdb-iceberg; enforces the minimums."""
    con = iceberg_connection()
    files, manifests = con.execute(
        f"SELECT count(*) FILTER (WHERE manifest_content = 'DATA' AND status <> 'DELETED'), count(DISTINCT manifest_path) "
        f"FROM iceberg_metadata({quote(metadata)})"
    ).fetchone()
    con.close()
    if files < MIN_DATA_FILES or manifests < MIN_MANIFESTS:
        raise SystemExit(f"table too small: {files} data files in {manifests} manifests (want ≥{MIN_DATA_FILES} in ≥{MIN_MANIFESTS})")
    return files, manifests


# --------------------------------------------------------------------------- the three contenders


def run_lakehouse(extension: Path, metadata: str) -> dict[str, int]:
    """Per-partition data file counts from lakehouse_fragmentation."""
    con = lakehouse_connection(extension)
    try:
        cursor = con.execute(
            f"SELECT * FROM lakehouse_fragmentation({quote(metadata)}, small_file_threshold_mb := {SMALL_FILE_THRESHOLD_MB})"
        )
        names = [d[0] for d in cursor.description]
        rows = [dict(zip(names, row)) for row in cursor.fetchall()]
    finally:
        con.close()
    return {r["partition"]: r["total_files"] for r in rows}


def run_pyiceberg(catalog: SqlCatalog) -> dict[str, int]:
    """Per-partition data file counts from pyiceberg inspect.files() + a pyarrow group_by."""
    table = catalog.load_table(f"{NAMESPACE}.{TABLE_NAME}")
    files = table.inspect.files()
    files = files.filter(pc.equal(files["content"], 0))
    partition = files["partition"].combine_chunks()
    key_names = [partition.type.field(i).name for i in range(partition.type.num_fields)]
    limit = SMALL_FILE_THRESHOLD_MB * MIB
    grouped = pa.table(
        {
            **{f"p_{name}": pc.struct_field(partition, name) for name in key_names},
            "size": files["file_size_in_bytes"],
            "small": pc.cast(pc.less(files["file_size_in_bytes"], limit), pa.int64()),
        }
    ).group_by([f"p_{name}" for name in key_names]).aggregate([("size", "count"), ("size", "sum"), ("small", "sum")])
    counts = {}
    for row in grouped.to_pylist():
        label = "/".join(f"{name}={_human(row[f'p_{name}'])}" for name in key_names) or "(unpartitioned)"
        counts[label] = row["size_count"]
    return counts


def _human(value: Any) -> str:
    """A partition value as a label (identity partitions only; that is what the demo uses)."""
    if value is None:
        return "null"
    return value.isoformat() if isinstance(value, dt.date) else str(value)


def run_duckdb_iceberg(metadata: str) -> dict[str, int]:
    """Per-partition data file counts from iceberg_metadata, by the partition directory of each path."""
    con = iceberg_connection()
    try:
        rows = con.execute(
            f"""
            SELECT regexp_extract(file_path, '/([^/]+)/[^/]+$', 1) AS partition, count(*) AS files,
                   sum(record_count) AS records
            FROM iceberg_metadata({quote(metadata)})
            WHERE status <> 'DELETED' AND manifest_content = 'DATA'
            GROUP BY partition
            """
        ).fetchall()
    finally:
        con.close()
    return {p: n for p, n, _records in rows}


class SparkFiles:
    """Spark's `<table>.files` metadata table through a JDBC catalog on the same sqlite catalog
    (named like the pyiceberg one, so the same row), in a local[2] session started once: the JVM's
    start is timed apart (``jvm_seconds``), and with the catalog cache off every run reloads the
    table metadata, as every other method does."""

    def __init__(self, bench_dir: Path) -> None:
        sys.path.insert(0, str(REPO_ROOT / "test" / "integration"))
        import spark as sp

        self.version = sp.PYSPARK_VERSION
        prefix = "spark.sql.catalog.bench"
        builder = (
            sp.session_builder(bench_dir / "spark-scratch", "lakehouse-bench-profile", quick_jvm=False)
            .config(prefix, "org.apache.iceberg.spark.SparkCatalog")
            .config(f"{prefix}.type", "jdbc")
            .config(f"{prefix}.uri", f"jdbc:sqlite:{bench_dir}/catalog.db")
            .config(f"{prefix}.warehouse", f"file://{bench_dir}/warehouse")
            .config(f"{prefix}.cache-enabled", "false")
        )
        started = time.perf_counter()
        self.session = builder.getOrCreate()
        self.session.sparkContext.setLogLevel("ERROR")
        self.jvm_seconds = time.perf_counter() - started

    def run(self) -> dict[str, int]:
        limit = SMALL_FILE_THRESHOLD_MB * MIB
        rows = self.session.sql(
            f"SELECT partition, count(*) AS files, sum(file_size_in_bytes) AS bytes, "
            f"sum(CASE WHEN file_size_in_bytes < {limit} THEN 1 ELSE 0 END) AS small "
            f"FROM bench.{NAMESPACE}.{TABLE_NAME}.files WHERE content = 0 GROUP BY partition"
        ).collect()
        counts = {}
        for row in rows:
            partition = row["partition"].asDict() if row["partition"] is not None else {}
            label = "/".join(f"{k}={_human(v)}" for k, v in partition.items()) or "(unpartitioned)"
            counts[label] = row["files"]
        return counts

    def stop(self) -> None:
        self.session.stop()


def timed_runs(run: Callable[[], Any], repeat: int, warmup: int) -> tuple[list[float], Any]:
    """(wall-clock seconds of each of ``repeat`` timed runs after ``warmup`` untimed ones, last result)."""
    result = None
    for _ in range(warmup):
        result = run()
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - started)
    return times, result


# --------------------------------------------------------------------------- report


def report(rows: list[tuple[str, str, list[float]]], facts: dict[str, Any], repeat: int, warmup: int) -> str:
    """The markdown report: table facts, then one line per contender (median, worst, best, every run;
    the ratio is of medians)."""
    ours = statistics.median(rows[0][2])
    lines = [
        "# Profiling benchmark",
        "",
        f"Table: `lakehouse_demo(scale := {DEMO_PARAMS['scale']}, file_multiplier := {DEMO_PARAMS['file_multiplier']}, "
        f"snapshots := {DEMO_PARAMS['snapshots']})` — {facts['data_files']:,} data files in {facts['manifests']} manifests, "
        f"{facts['partitions']} partitions, {facts['total_mib']:.1f} MiB.",
        "",
        f"{repeat} timed runs per method after {warmup} warm-up (ratios of medians); {facts['when']}; {facts['machine']}; "
        f"lakehouse extension: `{facts['extension']}`; duckdb {duckdb.__version__}, pyiceberg {pyiceberg.__version__}, "
        f"pyarrow {pa.__version__}.",
        "",
        "| method | median s | worst s | best s | every run (s) | median ratio to lakehouse |",
        "|---|---:|---:|---:|---|---:|",
    ]
    for name, _what, times in rows:
        median = statistics.median(times)
        runs = ", ".join(f"{t:.3f}" for t in times)
        lines.append(
            f"| {name} | {median:.3f} | {max(times):.3f} | {min(times):.3f} | {runs} | {median / ours:.2f}× |"
        )
    lines += ["", *[f"- **{name}**: {what}" for name, what, _ in rows], ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default=DEFAULT_DIR, help=f"cache directory for the table and catalog (default {DEFAULT_DIR})")
    parser.add_argument("--rebuild", action="store_true", help="rewrite the cached table")
    parser.add_argument("--extension", help="lakehouse extension file")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per method (each is reported)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed runs per method first")
    parser.add_argument("--output", default=str(DEFAULT_OUTPUT), help="markdown report path")
    parser.add_argument("--no-spark", action="store_true", help="leave Spark out")
    args = parser.parse_args(argv)

    extension = extension_path(args.extension)
    if not extension.is_file():
        raise SystemExit(f"lakehouse extension {extension} does not exist: build it first (make)")
    bench_dir = Path(args.dir).resolve()
    demo = build_table(bench_dir, extension, args.rebuild)
    metadata = demo["metadata_location"].removeprefix("file://")
    catalog = register_catalog(bench_dir, metadata)
    data_files, manifests = check_table(metadata)
    print(f"table: {data_files} data files in {manifests} manifests ({metadata})")

    contenders = [
        ("lakehouse_fragmentation", "`SELECT * FROM lakehouse_fragmentation(<metadata.json>, small_file_threshold_mb := 0.0064)`",
         lambda: run_lakehouse(extension, metadata)),
        (f"pyiceberg {pyiceberg.__version__}", "`load_table` + `table.inspect.files()` + pyarrow `group_by` (count, sum of sizes, small count)",
         lambda: run_pyiceberg(catalog)),
        (f"duckdb-iceberg {duckdb.__version__}", "`iceberg_metadata(<metadata.json>)` `GROUP BY` the partition directory of `file_path`",
         lambda: run_duckdb_iceberg(metadata)),
    ]
    spark = None
    if not args.no_spark:
        spark = SparkFiles(bench_dir)
        print(f"  (Spark: JVM + SparkSession started in {spark.jvm_seconds:.1f} s, not timed below)")
        contenders.append(
            (f"Spark {spark.version} `files` table",
             "`SELECT partition, count(*), sum(file_size_in_bytes), sum(small) FROM <catalog>.bench.profile.files WHERE "
             f"content = 0 GROUP BY partition` in `local[2]` through Iceberg 1.10.1's JDBC catalog on the same sqlite catalog "
             f"(catalog cache off; JVM + session start, {spark.jvm_seconds:.1f} s, not included)",
             spark.run))
    timings, counts = [], {}
    for name, what, run in contenders:
        times, result = timed_runs(run, args.repeat, args.warmup)
        print(f"  {name}: median {statistics.median(times):.3f} s, worst {max(times):.3f} s")
        timings.append((name, what, times))
        counts[name] = result
    if spark is not None:
        spark.stop()

    totals = {name: sum(c.values()) for name, c in counts.items()}
    if len(set(totals.values())) != 1:
        raise SystemExit(f"the methods disagree on the total data file count: {totals}")
    if len({json.dumps(c, sort_keys=True) for c in counts.values()}) != 1:
        raise SystemExit(f"the methods disagree on per-partition file counts: {counts}")
    assert totals[timings[0][0]] == data_files, (totals, data_files)

    facts = {
        "data_files": data_files,
        "manifests": manifests,
        "partitions": len(counts[timings[0][0]]),
        "total_mib": demo["total_bytes"] / MIB,
        "when": dt.date.today().isoformat(),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
        "extension": os.path.relpath(extension, REPO_ROOT),
    }
    markdown = report(timings, facts, args.repeat, args.warmup)
    print()
    print(markdown)
    output = Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(markdown)
    print(f"written to {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
