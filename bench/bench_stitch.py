#!/usr/bin/env python3
"""Benchmark: row-group stitching vs re-encoding vs the bare DuckDB COPY floor, on files of 16–32 MiB.

Usage::

    .venv/bin/python bench/bench_stitch.py [--dir /tmp/lakehouse-bench-stitch] [--repeat 10]

One set of source data is written once by DuckDB and cached under ``--dir``: 2 partitions
(``partition_date`` 2026-10-01, 2026-10-02) of 8 files each, 16–32 MiB per file (sizes spread
evenly), zstd, DuckDB's default row groups (122,880 rows, ~4 MiB), Iceberg field ids 1…5; columns
``id BIGINT, partition_date DATE, value DOUBLE, payload VARCHAR (md5), user_id INTEGER``.

Each method gets a FRESH copy of those files in its own directory (setup, timed run and
validation each in a process of their own, ``sync`` before the timed run, methods alternated
within each round):

1. **stitch**: a pyiceberg ``SqlCatalog`` table identity-partitioned on ``partition_date``, the
   copies registered with ``add_files``; timed: ``lakehouse_compact(…, small_file_threshold_mb :=
   64, target_file_size_mb := 128)`` (``stitch`` on, the default).
2. **re-encode**: the same, with ``stitch := false`` (DuckDB COPY per group, as before stitching).
3. **floor**: bare DuckDB, no metadata: per partition ``COPY (SELECT * FROM read_parquet([<its
   files>])) TO '<out>/<d>.parquet' (FORMAT parquet, COMPRESSION zstd)`` on one fresh connection.

Seconds are wall-clock seconds of the call, DuckDB connect and LOAD included. Validation reads
the table back through pyiceberg (not our code) and compares row count, per-partition rows and
column checksums with the source's. Then, for stitch and re-encode, **scan speed after
compaction**: DuckDB reads the table's current files (``read_parquet`` of what the table lists)
5 times per query, median seconds: a full scan (``sum(value), sum(user_id), max(payload)``) and a
selective one (``WHERE id BETWEEN …``, 0.1 % of rows, row-group pruning on statistics).

Results are printed and written to ``bench/results/stitch.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT / "bench"))
import benchlib  # noqa: E402
from benchlib import MIB, quote, quote_list  # noqa: E402

DEFAULT_DIR = "/tmp/lakehouse-bench-stitch"
DEFAULT_OUTPUT = REPO_ROOT / "bench" / "results" / "stitch.md"
METHODS = ["stitch", "re-encode", "floor"]
NAMESPACE, TABLE_NAME, CATALOG_NAME = "ns", "t", "default"
DATES = ["2026-10-01", "2026-10-02"]
FILES_PER_PARTITION = 8
ROWS_PER_MIB = 34_000  # measured: DuckDB's zstd file of these columns holds ~34,000 rows per MiB
SCAN_REPEAT = 5
FIELD_IDS = "{id: 1, partition_date: 2, value: 3, payload: 4, user_id: 5}"
# What `checksums` computes; a cached source of another version gets its checksums again.
CHECKSUMS_VERSION = 2


def file_mib(k: int) -> float:
    """File k of a partition: 16 … 32 MiB, evenly spread."""
    return 16 + 16 * k / (FILES_PER_PARTITION - 1)


def build_source(bench_dir: Path, rebuild: bool) -> dict[str, Any]:
    """Writes (once) the source files; returns the manifest (files per partition, checksums)."""
    import duckdb

    source = bench_dir / "source"
    manifest_path = bench_dir / "source.json"
    if manifest_path.exists() and not rebuild:
        manifest = json.loads(manifest_path.read_text())
        if manifest.get("checksums_version") != CHECKSUMS_VERSION:
            paths = [str(source / f) for fs in manifest["files"].values() for f in fs]
            manifest |= {"checksums": checksums(duckdb.connect(), paths), "checksums_version": CHECKSUMS_VERSION}
            manifest_path.write_text(json.dumps(manifest, indent=1))
        return manifest
    shutil.rmtree(source, ignore_errors=True)
    con = duckdb.connect()
    files: dict[str, list[str]] = {}
    offset = 0
    for d in DATES:
        directory = source / f"partition_date={d}"
        directory.mkdir(parents=True)
        for k in range(FILES_PER_PARTITION):
            rows = int(file_mib(k) * ROWS_PER_MIB)
            path = directory / f"part-{k:02d}.parquet"
            con.execute(
                f"COPY (SELECT i AS id, DATE '{d}' AS partition_date, random() AS value, md5(i::VARCHAR) AS payload, "
                f"(i % 100000)::INTEGER AS user_id FROM range({offset}, {offset + rows}) t(i)) TO {quote(str(path))} "
                f"(FORMAT parquet, COMPRESSION zstd, FIELD_IDS {FIELD_IDS})"
            )
            offset += rows
            files.setdefault(d, []).append(str(path.relative_to(source)))
    manifest = {"files": files, "checksums": checksums(con, [str(source / f) for fs in files.values() for f in fs]),
                "checksums_version": CHECKSUMS_VERSION}
    manifest["bytes"] = sum((source / f).stat().st_size for fs in files.values() for f in fs)
    manifest_path.write_text(json.dumps(manifest, indent=1))
    return manifest


def checksums(con: Any, paths: list[str]) -> dict[str, Any]:
    """Rows, per-partition rows and exact column sums (the doubles as integers of 1e-9, so that
    the order a parallel sum adds them in does not matter)."""
    row = con.execute(
        f"SELECT count(*), sum(id)::VARCHAR, sum(user_id)::VARCHAR, sum(round(value * 1e9)::HUGEINT)::VARCHAR, count(payload), "
        f"min(payload), max(payload) FROM read_parquet({quote_list(paths)})"
    ).fetchone()
    per = con.execute(
        f"SELECT partition_date::VARCHAR, count(*) FROM read_parquet({quote_list(paths)}) GROUP BY 1 ORDER BY 1"
    ).fetchall()
    return {"rows": row[0], "sums": list(row[1:]), "per_partition": dict(per)}


def table_dir(workdir: Path) -> Path:
    return workdir / "warehouse" / f"{NAMESPACE}.db" / TABLE_NAME


def setup(method: str, workdir: Path, bench_dir: Path, manifest: dict[str, Any]) -> dict[str, Any]:
    data = table_dir(workdir) / "data" if method != "floor" else workdir / "input"
    copies = []
    for d, files in manifest["files"].items():
        for f in files:
            target = data / f
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(bench_dir / "source" / f, target)
            copies.append(str(target))
    if method == "floor":
        return {"files": copies}
    catalog = benchlib.sql_catalog(CATALOG_NAME, workdir, workdir / "warehouse")
    table = benchlib.register_files(catalog, NAMESPACE, TABLE_NAME, benchlib.five_column_schema(), "partition_date",
                                    table_dir(workdir), [f"file://{p}" for p in copies])
    return {"files": copies, "metadata_location": table.metadata_location}


def run(method: str, workdir: Path, extension: str) -> dict[str, Any]:
    started = time.perf_counter()
    if method == "floor":
        import duckdb

        con = duckdb.connect()
        out = workdir / "out"
        out.mkdir()
        rows = []
        for d in DATES:
            files = sorted(str(p) for p in (workdir / "input" / f"partition_date={d}").glob("*.parquet"))
            rows.append(con.execute(
                f"COPY (SELECT * FROM read_parquet({quote_list(files)})) TO {quote(str(out / f'{d}.parquet'))} "
                f"(FORMAT parquet, COMPRESSION zstd)").fetchone())
        con.close()
        return {"seconds": time.perf_counter() - started, "result_rows": rows}
    stitch = "true" if method == "stitch" else "false"
    con = benchlib.lakehouse_connection(extension)
    rows = benchlib.fetch_dicts(con.execute(
        f"SELECT partition, verdict, input_files, output_files, bytes_rewritten, method, method_reason "
        f"FROM lakehouse_compact({quote(f'{NAMESPACE}.{TABLE_NAME}')}, catalog_uri := {quote(benchlib.catalog_uri(workdir))}, "
        f"small_file_threshold_mb := 64, target_file_size_mb := 128, stitch := {stitch})"))
    con.close()
    return {"seconds": time.perf_counter() - started, "result_rows": rows}


def validate(method: str, workdir: Path, manifest: dict[str, Any]) -> dict[str, Any]:
    import duckdb

    con = duckdb.connect()
    if method == "floor":
        files = sorted(str(p) for p in (workdir / "out").glob("*.parquet"))
        return {"checksums_match": checksums(con, files) == manifest["checksums"], "files_after": len(files)}
    import pyarrow.compute as pc

    table = benchlib.sql_catalog(CATALOG_NAME, workdir, workdir / "warehouse").load_table(f"{NAMESPACE}.{TABLE_NAME}")
    arrow = table.scan().to_arrow()  # pyiceberg reads the table: not our reader
    con.register("scanned", arrow)
    got = con.execute(
        "SELECT count(*), sum(id)::VARCHAR, sum(user_id)::VARCHAR, sum(round(value * 1e9)::HUGEINT)::VARCHAR, count(payload), "
        "min(payload), max(payload) FROM scanned").fetchone()
    per = dict(con.execute("SELECT partition_date::VARCHAR, count(*) FROM scanned GROUP BY 1 ORDER BY 1").fetchall())
    match = {"rows": got[0], "sums": list(got[1:]), "per_partition": per} == manifest["checksums"]
    del arrow, pc
    files = [f["path"].removeprefix("file://") for f in benchlib.iceberg_files(table, "partition_date")]
    full = f"SELECT sum(value), sum(user_id), max(payload) FROM read_parquet({quote_list(files)})"
    total = manifest["checksums"]["rows"]
    low = total // 2
    selective = f"SELECT count(*), sum(value) FROM read_parquet({quote_list(files)}) WHERE id BETWEEN {low} AND {low + total // 1000}"
    scans = {}
    for name, sql in (("full", full), ("selective", selective)):
        con.execute(sql).fetchall()  # warm
        times = []
        for _ in range(SCAN_REPEAT):
            started = time.perf_counter()
            con.execute(sql).fetchall()
            times.append(time.perf_counter() - started)
        scans[name] = statistics.median(times)
    row_groups = con.execute(f"SELECT count(*) FROM parquet_metadata({quote_list(files)}) WHERE column_id = 0").fetchone()[0]
    return {"checksums_match": match, "files_after": len(files), "row_groups": row_groups, "scan_seconds": scans,
            "bytes_after": sum(os.path.getsize(f) for f in files)}


def child(args: argparse.Namespace) -> int:
    workdir, bench_dir = Path(args.workdir), Path(args.dir)
    manifest = json.loads((bench_dir / "source.json").read_text())
    if args.child == "setup":
        out = setup(args.method, workdir, bench_dir, manifest)
    elif args.child == "run":
        out = run(args.method, workdir, args.extension)
    else:
        out = validate(args.method, workdir, manifest)
    (workdir / f"{args.child}.json").write_text(json.dumps(out, default=str))
    return 0


def report(results: dict[str, list[dict[str, Any]]], manifest: dict[str, Any]) -> str:
    def seconds(method: str) -> list[float]:
        return [r["run"]["seconds"] for r in results.get(method, [])]

    floor = statistics.median(seconds("floor")) if results.get("floor") else None
    lines = [
        "# Row-group stitching vs re-encoding vs the DuckDB COPY floor",
        "",
        f"Machine: {benchlib.machine(ram=True)}; nothing else running (the runs alternate methods round by round).",
        f"Source: {sum(len(f) for f in manifest['files'].values())} files of 16–32 MiB in {len(DATES)} partitions, "
        f"{manifest['bytes'] / MIB:,.0f} MiB, {manifest['checksums']['rows']:,} rows, DuckDB's row groups (zstd). "
        "Reproduce: `.venv/bin/python bench/bench_stitch.py --repeat 10` (`make bench` runs it).",
        "",
        "| method | runs | median s | slowest s | fastest s | median vs floor | MiB/s (median) | every run (s) | rows identical |",
        "|---|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for method in METHODS:
        runs = results.get(method)
        if not runs:
            continue
        s = seconds(method)
        median = statistics.median(s)
        ratio = f"{floor / median:.1f}× faster" if floor and median < floor else (f"{median / floor:.2f}×" if floor else "")
        ok = all(r["validate"]["checksums_match"] for r in runs)
        lines.append(
            f"| {method} | {len(s)} | {median:.2f} | {max(s):.2f} | {min(s):.2f} | {ratio} | {manifest['bytes'] / MIB / median:,.0f} | "
            f"{', '.join(f'{x:.2f}' for x in s)} | {'yes' if ok else 'NO'} |")
    lines += ["", "Scan speed after compaction (DuckDB over the table's files, median of 5 per run, then median over runs):", "",
              "| method | files | row groups | MiB | full scan s | selective scan s |", "|---|---:|---:|---:|---:|---:|"]
    scans: dict[str, dict[str, float]] = {}
    for method in ("stitch", "re-encode"):
        runs = results.get(method)
        if not runs:
            continue
        v = runs[-1]["validate"]
        scans[method] = {k: statistics.median(r["validate"]["scan_seconds"][k] for r in runs) for k in ("full", "selective")}
        lines.append(f"| {method} | {v['files_after']} | {v['row_groups']} | {v['bytes_after'] / MIB:,.0f} | "
                     f"{scans[method]['full']:.3f} | {scans[method]['selective']:.4f} |")
    if len(scans) == 2:
        lines += ["", "Stitched / re-encoded scan time: "
                  + ", ".join(f"{k} {scans['stitch'][k] / scans['re-encode'][k]:.2f}×" for k in ("full", "selective"))]
    if results.get("stitch"):
        lines += ["", "What `lakehouse_compact` returned (last stitch run):", "", "```",
                  json.dumps(results["stitch"][-1]["run"]["result_rows"], indent=1, default=str), "```"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default=DEFAULT_DIR)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--rebuild", action="store_true")
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--extension")
    parser.add_argument("--output", default=str(DEFAULT_OUTPUT))
    parser.add_argument("--child", choices=["setup", "run", "validate"], help=argparse.SUPPRESS)
    parser.add_argument("--method", help=argparse.SUPPRESS)
    parser.add_argument("--workdir", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args)
    extension = benchlib.extension_path(args.extension)
    methods = benchlib.selected_methods(args.methods, METHODS, extension)
    bench_dir = Path(args.dir)
    bench_dir.mkdir(parents=True, exist_ok=True)
    manifest = build_source(bench_dir, args.rebuild)

    def phase(method: str, name: str, workdir: Path, attempt: int) -> dict[str, Any]:
        return benchlib.run_phase(__file__, method, name, workdir, bench_dir, extension)

    def progress(name: str, out: dict[str, Any], _setup: dict[str, Any]) -> str:
        if name == "run":
            return f"    {out['seconds']:.2f} s"
        if name == "validate":
            return f"    rows identical: {out['checksums_match']}, files after: {out['files_after']}"
        return "    ready"

    results = benchlib.run_methods(methods, args.repeat, bench_dir, args.keep, phase, progress)
    markdown = report(results, manifest)
    benchlib.write_report(markdown, args.output, bench_dir / "results.json", {"results": results})
    return 0 if all(r["validate"]["checksums_match"] for runs in results.values() for r in runs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
