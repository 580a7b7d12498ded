#!/usr/bin/env python3
"""Benchmark: a Delta table whose files carry deletion vectors, rewritten with the deleted rows
purged — lakehouse vs Spark's ``REORG … APPLY (PURGE)`` and ``OPTIMIZE`` vs delta-rs's
``optimize.compact``, on the same table, same cores, one run.

Usage (``make bench`` runs it in ``.venv-spark400``, see bench/requirements-spark400.txt)::

    LAKEHOUSE_PYSPARK_VERSION=4.0.0 .venv-spark400/bin/python bench/bench_delta_purge.py [--dir /tmp/lakehouse-bench-dv] [--rows 18000000] [--files 32] [--repeat 3]

The table (built once per run by Apache Spark 4.0.1 + Delta Lake 4.0.0, local[2]): unpartitioned,
``delta.enableDeletionVectors``; ``--rows`` rows (``id BIGINT, payload STRING`` (a SHA-256 hex),
``x DOUBLE``) written as ``--files`` files in one INSERT (about 1 GiB at the defaults), then
``DELETE … WHERE id % 10 = 0``: every file gets a deletion vector deleting 10 % of its rows. Each
method runs ``--repeat`` times on a fresh byte-identical copy (same absolute path):

1. **lakehouse**: ``lakehouse_compact(t, small_file_threshold_mb := 64, target_file_size_mb :=
   128)`` — every file is small; bin-packed into ~128 MiB files, vectors applied (OPTIMIZE).
2. **lakehouse-purge**: ``lakehouse_compact(t, small_file_threshold_mb := 1)`` — nothing is small;
   every file is rewritten alone because its vector deletes ≥ 5 % of its rows
   (``delete_ratio_threshold``, 0.05): what ``REORG … APPLY (PURGE)`` is for.
3. **spark-reorg**: ``REORG TABLE delta.`t` APPLY (PURGE)`` (Delta's defaults: bins up to 1 GiB).
4. **spark-optimize**: ``OPTIMIZE delta.`t``` with ``optimize.minFileSize`` 64 MiB and
   ``maxFileSize`` 128 MiB (our threshold and target). JVM start excluded for both.
5. **delta-rs**: ``DeltaTable(t).optimize.compact(target_size=128 MiB)`` (deltalake, in process).

Timed: the call (wall clock; lakehouse in a fresh DuckDB connection per run, connect and LOAD
not timed, as the JVM's start is not). Verified after every run through DuckDB's delta extension (count,
sum(id), sum(x)) and, after each method's last run, through Spark: equal to Spark's figures
before, with the expected count; the files left with a deletion vector are counted. Every run is
reported, with median and worst; ratios are of medians. Results go to ``bench/results/delta_purge.md``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT / "test" / "integration"))
sys.path.insert(0, str(REPO_ROOT / "bench"))

import benchlib  # noqa: E402
from bench_object_storage import pip_extension  # noqa: E402

MIB = 1024 * 1024
# What the report says of the Spark that ran (make bench runs 4.0.0: see bench/requirements-spark400.txt).
SPARK_NOTES = {
    "4.0.0": "Spark 4.0.0 (pyspark==4.0.0, the Spark Delta 4.0.0 was built for): under the tests' Spark 4.0.1, Delta "
             "4.0.0's REORG … APPLY (PURGE) fails on this table with NoSuchMethodError ParquetToSparkSchemaConverter.",
}
METHODS = ["lakehouse", "lakehouse-purge", "spark-reorg", "spark-optimize", "delta-rs"]
# Whose median each of ours is compared with, and the goal of issue 31.
PEERS = {"lakehouse-purge": ("spark-reorg", 3.0), "lakehouse": ("delta-rs", 1.2)}


def spark_session(workdir: Path) -> Any:
    import spark as sp

    session = sp.session_builder(workdir / "spark-scratch", "lakehouse-bench-dv", driver_memory="3g",
                                 quick_jvm=False, delta=True).getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def build(spark: Any, path: Path, rows: int, files: int) -> None:
    t = f"delta.`{path}`"
    spark.sql(f"CREATE TABLE {t} (id BIGINT, payload STRING, x DOUBLE) USING delta "
              "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    (spark.range(rows).selectExpr("id", "sha2(CAST(id AS STRING), 256) AS payload", "rand(3) AS x")
     .repartition(files).write.format("delta").mode("append").save(str(path)))
    spark.sql(f"DELETE FROM {t} WHERE id % 10 = 0")


def duck_figures(con: Any, path: Path) -> tuple:
    return tuple(con.execute(f"SELECT count(*), sum(id), round(sum(x), 4) FROM delta_scan('{path}')").fetchone())


def spark_figures(spark: Any, path: Path) -> tuple:
    row = spark.sql(f"SELECT count(*), sum(id), round(sum(x), 4) FROM delta.`{path}`").collect()[0]
    return (row[0], row[1], float(row[2]))


def file_counts(spark: Any, path: Path) -> tuple[int, int]:
    """(live files, of which with a deletion vector), from Spark's own snapshot."""
    snapshot = spark._jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, str(path)).update(
        False, spark._jvm.scala.Option.empty(), spark._jvm.scala.Option.empty())
    frame = snapshot.allFiles().toDF()
    from pyspark.sql import DataFrame

    df = DataFrame(frame, spark)
    return df.count(), df.where("deletionVector IS NOT NULL").count()


def run(method: str, spark: Any, con: Any, path: Path) -> str:
    if method in ("lakehouse", "lakehouse-purge"):
        small = 64 if method == "lakehouse" else 1
        out = con.execute(
            f"SELECT sum(input_files), sum(output_files), sum(rows_purged) FROM lakehouse_compact('{path}', "
            f"small_file_threshold_mb := {small}, target_file_size_mb := 128)"
        ).fetchone()
        return f"{out[0]} files → {out[1]}, {out[2]:,} rows purged"
    if method == "spark-reorg":
        for key in ("minFileSize", "maxFileSize"):
            spark.conf.unset(f"spark.databricks.delta.optimize.{key}")
        row = spark.sql(f"REORG TABLE delta.`{path}` APPLY (PURGE)").collect()[0].asDict(recursive=True)
    elif method == "spark-optimize":
        spark.conf.set("spark.databricks.delta.optimize.minFileSize", str(64 * MIB))
        spark.conf.set("spark.databricks.delta.optimize.maxFileSize", str(128 * MIB))
        row = spark.sql(f"OPTIMIZE delta.`{path}`").collect()[0].asDict(recursive=True)
    else:
        from deltalake import DeltaTable

        metrics = DeltaTable(str(path)).optimize.compact(target_size=128 * MIB)
        return f"{metrics['numFilesRemoved']} files → {metrics['numFilesAdded']}"
    metrics = row.get("metrics") or {}
    return f"{metrics.get('numFilesRemoved')} files → {metrics.get('numFilesAdded')}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", default="/tmp/lakehouse-bench-dv")
    parser.add_argument("--rows", type=int, default=18_000_000)
    parser.add_argument("--files", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--note", default="", help="a line added to the report (e.g. which Spark build ran)")
    parser.add_argument("--extension", default=os.environ.get("LAKEHOUSE_EXTENSION", "build/release/lakehouse.duckdb_extension"))
    args = parser.parse_args()
    import deltalake
    import duckdb
    import pyspark

    methods = [m for m in args.methods.split(",") if m]
    workdir = Path(args.dir)
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    started_all = time.perf_counter()
    spark = spark_session(workdir)
    saved, path = workdir / "saved", workdir / "table"
    build(spark, saved, args.rows, args.files)
    table_bytes = sum(p.stat().st_size for p in saved.glob("*.parquet"))
    files_before = file_counts(spark, saved)
    expected = spark_figures(spark, saved)
    if expected[0] != args.rows - len(range(0, args.rows, 10)):
        raise SystemExit(f"the table has {expected[0]} rows, not 90 % of {args.rows}")

    con = benchlib.lakehouse_connection(Path(args.extension).resolve())
    con.execute(f"LOAD '{pip_extension('delta')}'")
    if duck_figures(con, saved) != expected:
        raise SystemExit(f"DuckDB reads {duck_figures(con, saved)} before, Spark {expected}")
    results: dict[str, list[dict[str, Any]]] = {m: [] for m in methods}
    for attempt in range(args.repeat):
        for method in methods:  # interleaved: every method sees the same machine state
            if path.exists():
                shutil.rmtree(path)
            shutil.copytree(saved, path, copy_function=shutil.copy2)
            os.sync()
            if results[method] and results[method][-1].get("failed"):
                continue  # a peer that failed once is reported failed, not run again
            if method.startswith("lakehouse"):
                # A fresh session per run (connect and LOAD not timed, as the JVM start is not):
                # no run inherits another's buffers.
                con.close()
                con = benchlib.lakehouse_connection(Path(args.extension).resolve())
                con.execute(f"LOAD '{pip_extension('delta')}'")
            started = time.perf_counter()
            try:
                detail = run(method, spark, con, path)
            except Exception as e:  # noqa: BLE001 - a peer's failure is a result, reported as such
                if method.startswith("lakehouse"):
                    raise
                first = str(e).strip().splitlines()
                reason = next((line for line in first if "Error" in line or "Exception" in line), first[0] if first else "?")
                results[method].append({"failed": reason[:300]})
                print(f"{method} run {attempt + 1}: failed: {reason[:300]}", flush=True)
                continue
            seconds = time.perf_counter() - started
            got = duck_figures(con, path)
            if got != expected:
                raise SystemExit(f"{method}: DuckDB reads {got} after, Spark {expected} before")
            entry = {"seconds": seconds, "detail": detail}
            if attempt == args.repeat - 1:
                if spark_figures(spark, path) != expected:
                    raise SystemExit(f"{method}: Spark reads {spark_figures(spark, path)} after, {expected} before")
                entry["files_after"] = file_counts(spark, path)
            results[method].append(entry)
            print(f"{method} run {attempt + 1}: {seconds:.2f} s ({detail})", flush=True)
    spark.stop()

    median = {m: statistics.median(r["seconds"] for r in runs) for m, runs in results.items()
              if runs and not runs[-1].get("failed")}
    lines = [
        "# Delta deletion-vector purge benchmark",
        "",
        f"Table: Delta (Spark {pyspark.__version__} + Delta 4.0.0), unpartitioned, deletion vectors on; {args.rows:,} rows "
        f"in {files_before[0]} files ({table_bytes / MIB:,.0f} MiB); `DELETE … WHERE id % 10 = 0` left "
        f"{files_before[1]} files with a vector deleting 10 % of their rows; {expected[0]:,} rows live.",
        "",
        f"{dt.date.today()}; {benchlib.machine(ram=True)}; duckdb {duckdb.__version__}, deltalake {deltalake.__version__}, "
        f"Spark local[2]; extension `{args.extension}`. Full run {time.perf_counter() - started_all:.0f} s, "
        f"{args.repeat} runs per method, interleaved, each on a fresh copy.",
        "Command: `make bench` (or `LAKEHOUSE_PYSPARK_VERSION=4.0.0 .venv-spark400/bin/python bench/bench_delta_purge.py`).",
        *([note, ""] if (note := args.note or SPARK_NOTES.get(pyspark.__version__, "")) else [""]),
        "| method | runs (s) | median s | worst s | what it did | files after (with a vector) |",
        "|---|---|---:|---:|---|---|",
    ]
    for method, runs in results.items():
        if runs and runs[-1].get("failed"):
            lines.append(f"| {method} | failed | | | {runs[-1]['failed'].replace('|', '/')} | |")
            continue
        seconds = [r["seconds"] for r in runs]
        after = runs[-1].get("files_after", ("?", "?"))
        lines.append(f"| {method} | {', '.join(f'{s:.2f}' for s in seconds)} | {median[method]:.2f} | {max(seconds):.2f} | "
                     f"{runs[-1]['detail']} | {after[0]} ({after[1]}) |")
    lines += ["", "| ours | peer | peer median / ours | goal |", "|---|---|---:|---:|"]
    for ours, (peer, goal) in PEERS.items():
        if ours in median and peer in median:
            ratio = median[peer] / median[ours]
            lines.append(f"| {ours} | {peer} | {ratio:.2f}× | {goal}× {'met' if ratio >= goal else 'not met'} |")
        elif ours in median:
            lines.append(f"| {ours} | {peer} | — ({peer} failed) | {goal}× |")
    lines += [
        "",
        f"Rows verified after every run through DuckDB's delta extension (count, sum(id), sum(x)) and after each "
        f"method's last run through Spark: all equal to Spark's figures before ({expected[0]:,} rows).",
        "",
    ]
    benchlib.write_report("\n".join(lines), REPO_ROOT / "bench" / "results" / "delta_purge.md",
                          workdir / "results.json", {"results": results, "expected": expected})


if __name__ == "__main__":
    main()
