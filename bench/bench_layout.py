#!/usr/bin/env python3
"""Benchmark: what a layout buys readers — bin-pack vs sort vs z-order, ours vs Spark's own.

One Iceberg table written by Apache Spark (PySpark 4.0.1 + Iceberg 1.10.1, ``local[2]``) in many
small files: ``id bigint, x int, y double, s string, payload string`` (x and y uniform and
independent, payload 40 hex characters), unpartitioned. From the same pristine copy, each layout:

- ``small files``: the table as written;
- ``lakehouse binpack`` / ``lakehouse sort(x)`` / ``lakehouse zorder(x, y)``: ``lakehouse_compact``
  (release build) with ``strategy`` / ``sort_order``;
- ``spark sort(x)`` / ``spark zorder(x, y)``: ``CALL hc.system.rewrite_data_files(strategy =>
  'sort', sort_order => …)`` with the same target file size;

then the same queries through DuckDB's iceberg extension and through Spark:

- ``x = a`` (point on the sort column), ``x BETWEEN a AND a + 0.5 %`` (range),
- ``y = b`` (point on the second z-order column), ``x = a AND y = b`` (both),
- ``x`` and ``y`` each within 10 % of their domain (a box holding ~1 % of the rows).

Per query: files read (DuckDB's profile ``Total Files Read``; for Spark the files Iceberg's planner
keeps, which is what Spark's scan opens), bytes read (``rchar`` of ``/proc/<pid>/io`` around the
query: DuckDB in this process, Spark's driver JVM), and the median time of 3 runs after a warm-up.
Every query's ``count(*)`` and ``sum(id)`` must agree across layouts and engines.

Usage::

    LAKEHOUSE_EXTENSION=build/release/lakehouse.duckdb_extension .venv/bin/python bench/bench_layout.py [--rows 6000000]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchlib import REPO_ROOT, extension_path, iceberg_connection, lakehouse_connection, machine, quote, write_report

MIB = 1024 * 1024
SMALL_MB = 8.0
TARGET_MB = 16.0
NAME = "events"
X_DOMAIN = 1_000_000
Y_DOMAIN = 10_000.0

LAYOUTS = {
    "small files": None,
    "lakehouse binpack": ("lakehouse", "strategy := 'binpack'"),
    "lakehouse sort(x)": ("lakehouse", "sort_order := 'x'"),
    "lakehouse zorder(x, y)": ("lakehouse", "sort_order := 'zorder(x, y)'"),
    "spark sort(x)": ("spark", "x ASC NULLS FIRST"),
    "spark zorder(x, y)": ("spark", "zorder(x, y)"),
}


def rchar(pid: int | str = "self") -> int:
    with open(f"/proc/{pid}/io") as f:
        for line in f:
            if line.startswith("rchar:"):
                return int(line.split()[1])
    return 0


def spark_session(workdir: Path) -> Any:
    sys.path.insert(0, str(REPO_ROOT / "test" / "integration"))
    import spark as sp

    builder = sp.session_builder(workdir / "spark-scratch", "lakehouse-bench-layout", driver_memory="4g", quick_jvm=False)
    builder = (
        builder.config("spark.sql.catalog.hc", "org.apache.iceberg.spark.SparkCatalog")
        .config("spark.sql.catalog.hc.type", "hadoop")
        .config("spark.sql.catalog.hc.warehouse", f"file://{workdir}/warehouse")
        .config("spark.sql.catalog.hc.cache-enabled", "false")
    )
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def build(spark: Any, rows: int, files: int) -> None:
    spark.sql(
        f"""CREATE TABLE hc.ns.{NAME} (id bigint, x int, y double, s string, payload string) USING iceberg
        TBLPROPERTIES ('format-version'='2', 'write.distribution-mode'='none')"""
    )
    spark.sql(
        f"""INSERT INTO hc.ns.{NAME} SELECT /*+ REPARTITION({files}) */ id,
            CAST(pmod(hash(id), {X_DOMAIN}) AS int), pmod(hash(id, 7), 1000000) / 100.0,
            concat('k', pmod(hash(id, 3), 100000)), substr(sha2(CAST(id AS string), 256), 1, 40)
        FROM range({rows})"""
    )


def current_metadata(table_dir: Path) -> str:
    version = (table_dir / "metadata" / "version-hint.text").read_text().strip()
    return str(table_dir / "metadata" / f"v{version}.metadata.json")


def data_files(table_dir: Path) -> list[tuple[str, int]]:
    from pyiceberg.table import StaticTable

    return [(t.file.file_path, t.file.file_size_in_bytes) for t in StaticTable.from_metadata(current_metadata(table_dir)).scan().plan_files()]


def queries(spark: Any, seed: int) -> dict[str, str]:
    rng = random.Random(seed)
    # A present (x, y) pair for the point queries.
    row = spark.sql(f"SELECT x, y FROM hc.ns.{NAME} WHERE id = {rng.randrange(1000)}").collect()[0]
    a, b = row["x"], row["y"]
    lo = rng.randrange(X_DOMAIN - X_DOMAIN // 200)
    bx, by = rng.randrange(int(X_DOMAIN * 0.9)), rng.uniform(0, Y_DOMAIN * 0.9)
    return {
        "x = a": f"x = {a}",
        "x range 0.5 %": f"x BETWEEN {lo} AND {lo + X_DOMAIN // 200}",
        "y = b": f"y = {b!r}",
        "x = a AND y = b": f"x = {a} AND y = {b!r}",
        "x, y box 1 %": f"x BETWEEN {bx} AND {bx + X_DOMAIN // 10} AND y BETWEEN {by:.2f} AND {by + Y_DOMAIN / 10:.2f}",
    }


def duckdb_query(con: Any, metadata: str, where: str, runs: int) -> dict[str, Any]:
    sql = f"SELECT count(*), sum(id) FROM iceberg_scan({quote(metadata)}) WHERE {where}"
    profile = Path(tempfile.mkstemp(suffix=".json")[1])
    con.execute(f"PRAGMA enable_profiling = 'json'; PRAGMA profiling_output = {quote(str(profile))}")
    before = rchar()
    answer = con.execute(sql).fetchall()[0]
    read = rchar() - before
    con.execute("PRAGMA disable_profiling")

    def files(node: dict) -> int:
        own = int((node.get("extra_info") or {}).get("Total Files Read", 0) or 0)
        return own + sum(files(c) for c in node.get("children", []))

    files_read = files(json.loads(profile.read_text()))
    profile.unlink()
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        con.execute(sql).fetchone()
        times.append(time.perf_counter() - started)
    return {"answer": list(answer), "files": files_read, "bytes": read, "ms": statistics.median(times) * 1000}


def spark_query(spark: Any, where: str, runs: int) -> dict[str, Any]:
    pid = spark._jvm.java.lang.ProcessHandle.current().pid()
    df = spark.sql(f"SELECT count(*) AS n, sum(id) AS s FROM hc.ns.{NAME} WHERE {where}")
    before = rchar(pid)
    answer = df.collect()[0]
    read = rchar(pid) - before
    files, size = scan_metrics(df)
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        spark.sql(f"SELECT count(*), sum(id) FROM hc.ns.{NAME} WHERE {where}").collect()
        times.append(time.perf_counter() - started)
    return {
        "answer": [answer["n"], answer["s"]],
        "files": files,
        "planned_bytes": size,
        "bytes": read,
        "ms": statistics.median(times) * 1000,
    }


def scan_metrics(df: Any) -> tuple[int, int]:
    """(data files, their bytes) Iceberg's scan planned for the executed query: the
    ``resultDataFiles`` and ``totalFileSize`` metrics Iceberg reports on Spark's BatchScanExec."""
    leaves = df._jdf.queryExecution().executedPlan().collectLeaves().iterator()
    files = size = 0
    while leaves.hasNext():
        leaf = leaves.next()
        metrics = leaf.metrics()
        if metrics.contains("resultDataFiles"):
            files += metrics.apply("resultDataFiles").value()
            size += metrics.apply("totalFileSize").value() if metrics.contains("totalFileSize") else 0
    return files, size


def compact_lakehouse(extension: Path, table_dir: Path, layout: str) -> dict[str, Any]:
    con = lakehouse_connection(extension, "SET threads = 2")
    started = time.perf_counter()
    rows = con.execute(
        f"SELECT * FROM lakehouse_compact({quote(str(table_dir))}, small_file_threshold_mb := {SMALL_MB}, "
        f"target_file_size_mb := {TARGET_MB}, {layout})"
    ).fetchall()
    seconds = time.perf_counter() - started
    con.close()
    return {"seconds": seconds, "rows": len(rows)}


def compact_spark(spark: Any, sort_order: str) -> dict[str, Any]:
    started = time.perf_counter()
    row = spark.sql(
        f"CALL hc.system.rewrite_data_files(table => 'ns.{NAME}', strategy => 'sort', sort_order => '{sort_order}', "
        f"options => map('target-file-size-bytes', '{int(TARGET_MB * MIB)}', 'min-file-size-bytes', '{int(SMALL_MB * MIB)}'))"
    ).collect()[0]
    return {"seconds": time.perf_counter() - started, "metrics": row.asDict()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--extension", help="lakehouse.duckdb_extension (default: LAKEHOUSE_EXTENSION)")
    parser.add_argument("--rows", type=int, default=6_000_000)
    parser.add_argument("--files", type=int, default=600, help="small files Spark writes")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--output", default=str(REPO_ROOT / "bench" / "results" / "layout.md"))
    parser.add_argument("--workdir", help="keep the tables here (default: a temporary directory)")
    args = parser.parse_args()
    extension = extension_path(args.extension)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="lakehouse-bench-layout-"))
    spark = spark_session(workdir)
    table_dir = workdir / "warehouse" / "ns" / NAME
    pristine = workdir / "pristine"
    started = time.perf_counter()
    build(spark, args.rows, args.files)
    build_seconds = time.perf_counter() - started
    shutil.copytree(table_dir, pristine)
    where = queries(spark, 18)
    duck = iceberg_connection()
    duck.execute("SET threads = 2")

    results: dict[str, Any] = {}
    for name, how in LAYOUTS.items():
        if table_dir.exists():
            shutil.rmtree(table_dir)
        shutil.copytree(pristine, table_dir)
        compaction = None
        if how is not None:
            engine, layout = how
            compaction = compact_lakehouse(extension, table_dir, layout) if engine == "lakehouse" else compact_spark(spark, layout)
        files = data_files(table_dir)
        entry: dict[str, Any] = {
            "compaction": compaction,
            "files": len(files),
            "mib": sum(s for _, s in files) / MIB,
            "queries": {},
        }
        metadata = current_metadata(table_dir)
        for q, predicate in where.items():
            entry["queries"][q] = {
                "duckdb": duckdb_query(duck, metadata, predicate, args.runs),
                "spark": spark_query(spark, predicate, args.runs),
            }
        results[name] = entry
        print(f"{name}: {entry['files']} files, {entry['mib']:.1f} MiB"
              + (f", compacted in {compaction['seconds']:.1f} s" if compaction else ""), flush=True)

    # Every engine and layout answers every query alike.
    for q in where:
        answers = {(n, e): tuple(r["queries"][q][e]["answer"]) for n, r in results.items() for e in ("duckdb", "spark")}
        if len(set(answers.values())) != 1:
            raise SystemExit(f"{q}: answers differ: {answers}")
    spark.stop()
    report(args, where, results, build_seconds)
    if not args.workdir:
        shutil.rmtree(workdir, ignore_errors=True)


def report(args: argparse.Namespace, where: dict[str, str], results: dict[str, Any], build_seconds: float) -> None:
    base = results["lakehouse binpack"]
    lines = [
        "# Layouts: bin-pack vs sort vs z-order (lakehouse and Spark)",
        "",
        f"`bench/bench_layout.py --rows {args.rows} --files {args.files} --runs {args.runs}` ({machine(ram=True)}): "
        f"one unpartitioned Iceberg table written by Spark in {args.files} small files ({args.rows:,} rows, built in "
        f"{build_seconds:.0f} s); each layout from the same pristine copy, target {TARGET_MB:g} MiB, small below "
        f"{SMALL_MB:g} MiB. Queries (one row of answers, checked equal everywhere): "
        + "; ".join(f"**{q}** `{p}`" for q, p in where.items())
        + ".",
        "",
        "## Compaction",
        "",
        "| layout | files | MiB | seconds | vs Spark's same layout |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, r in results.items():
        c = r["compaction"]
        peer = {"lakehouse sort(x)": "spark sort(x)", "lakehouse zorder(x, y)": "spark zorder(x, y)"}.get(name)
        ratio = ""
        if c and peer and results[peer]["compaction"]:
            ratio = f"{results[peer]['compaction']['seconds'] / c['seconds']:.1f}x faster"
        lines.append(f"| {name} | {r['files']} | {r['mib']:.1f} | {c['seconds']:.1f} |" if c else f"| {name} | {r['files']} | {r['mib']:.1f} | – |")
        lines[-1] += f" {ratio} |"
    for engine, label in (("duckdb", "DuckDB's iceberg extension"), ("spark", "Spark (files: Iceberg's planner, what its scan opens)")):
        lines += ["", f"## Reads through {label}", ""]
        header = "| layout | " + " | ".join(where) + " |"
        lines += [header, "|---|" + "---:|" * len(where)]
        for name, r in results.items():
            cells = []
            for q in where:
                m = r["queries"][q][engine]
                cells.append(f"{m['files']} files, {m['bytes'] / MIB:.1f} MiB, {m['ms']:.0f} ms")
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += ["", "## Ratios (files read, bin-pack / layout; higher is better)", ""]
    lines += ["| layout | engine | " + " | ".join(where) + " |", "|---|---|" + "---:|" * len(where)]
    for name in ("lakehouse sort(x)", "spark sort(x)", "lakehouse zorder(x, y)", "spark zorder(x, y)"):
        for engine in ("duckdb", "spark"):
            cells = []
            for q in where:
                b = base["queries"][q][engine]["files"]
                v = results[name]["queries"][q][engine]["files"]
                cells.append(f"{b / v:.1f}x" if v else "all pruned")
            lines.append(f"| {name} | {engine} | " + " | ".join(cells) + " |")
    raw = Path(tempfile.gettempdir()) / "lakehouse-bench-layout.json"
    write_report("\n".join(lines) + "\n", args.output, raw, {"queries": where, "results": results})


if __name__ == "__main__":
    main()
