#!/usr/bin/env python3
"""Benchmark: profiling an Iceberg table of a million data files in 2,000 manifests — time and
peak RSS of lakehouse_fragmentation, DuckDB's iceberg extension and pyiceberg.

Usage::

    .venv/bin/python bench/bench_profile_scale.py [--dir /tmp/lakehouse-bench-scale] [--files 1000000] [--manifests 2000] [--no-pyiceberg]

The table is metadata only (no data file exists: profiling reads manifests, never data): one
pyiceberg fast append whose producer writes ``--manifests`` manifests of ``--files / --manifests``
entries each (identity-partitioned on ``d`` over 100 values, sizes between 1 MiB and 256 MiB), in
a sqlite ``SqlCatalog``; built once and cached under ``--dir``. Each method runs in a process of
its own (peak RSS = that process's ``VmHWM``, the Python interpreter and its imports included;
the RSS before the call is shown too), one warm-up and then the timed call:

1. ``SELECT count(*), sum(total_files) FROM lakehouse_fragmentation(<metadata.json>)``;
2. DuckDB's iceberg extension: ``iceberg_metadata(<metadata.json>)`` counted per partition
   directory (it exposes no partition values or sizes in 1.5.5);
3. pyiceberg: ``table.inspect.files()`` (``--no-pyiceberg`` leaves it out).

All must count the same files. Results go to ``bench/results/profile_scale.md``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import random
import subprocess
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT / "bench"))


def vm(key: str) -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
    return 0.0


def build(root: Path, files: int, manifests: int) -> str:
    import benchlib

    per_manifest = files // manifests
    rng = random.Random(7)

    def entries(location: str, m: int):
        for k in range(per_manifest):
            n = m * per_manifest + k
            d = n % 100
            size = rng.choice((1, 2, 8, 32, 256)) * 1024 * 1024
            yield f"{location}/data/d={d}/{m}-{n}.parquet", d, 1000, size

    return benchlib.scale_table(root, manifests, entries)


def child(method: str, metadata: str, root: Path, extension: str) -> dict:
    import duckdb

    before = vm("VmRSS")
    if method == "lakehouse":
        con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
        con.execute(f"LOAD '{extension}'")
        run = lambda: con.execute(f"SELECT sum(total_files) FROM lakehouse_fragmentation('{metadata}')").fetchone()[0]  # noqa: E731
    elif method == "duckdb-iceberg":
        from bench_object_storage import pip_extension

        con = duckdb.connect()
        for ext in ("avro", "iceberg"):
            con.execute(f"LOAD '{pip_extension(ext)}'")
        run = lambda: con.execute(  # noqa: E731
            "SELECT sum(n) FROM (SELECT regexp_extract(file_path, '.*/', 0) AS dir, count(*) AS n "
            f"FROM iceberg_metadata('{metadata}') WHERE status <> 'DELETED' GROUP BY dir)"
        ).fetchone()[0]
    else:
        from pyiceberg.catalog.sql import SqlCatalog

        catalog = SqlCatalog("default", uri=f"sqlite:///{root}/catalog.db", warehouse=f"file://{root}")
        run = lambda: catalog.load_table("scale.t").inspect.files().num_rows  # noqa: E731
    run()  # warm-up (file cache, imports)
    started = time.perf_counter()
    files = run()
    seconds = time.perf_counter() - started
    return {"method": method, "files": int(files), "seconds": seconds, "rss_before_mib": before, "peak_rss_mib": vm("VmHWM")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", default="/tmp/lakehouse-bench-scale")
    parser.add_argument("--files", type=int, default=1_000_000)
    parser.add_argument("--manifests", type=int, default=2000)
    parser.add_argument("--no-pyiceberg", action="store_true")
    parser.add_argument("--extension", default=os.environ.get("LAKEHOUSE_EXTENSION", "build/release/lakehouse.duckdb_extension"))
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--metadata", help=argparse.SUPPRESS)
    args = parser.parse_args()
    root = Path(args.dir) / f"{args.files}-{args.manifests}"
    extension = str(Path(args.extension).resolve())
    if args.child:
        print(json.dumps(child(args.child, args.metadata, root, extension)))
        return
    facts = root / "facts.json"
    if not facts.is_file():
        started = time.perf_counter()
        metadata = build(root, args.files, args.manifests)
        facts.write_text(json.dumps({"metadata": metadata, "build_s": time.perf_counter() - started}))
    metadata = json.loads(facts.read_text())["metadata"]
    methods = ["lakehouse", "duckdb-iceberg"] + ([] if args.no_pyiceberg else ["pyiceberg"])
    results = {}
    for method in methods:
        proc = subprocess.run([sys.executable, __file__, "--child", method, "--metadata", metadata, "--dir", args.dir,
                               "--files", str(args.files), "--manifests", str(args.manifests), "--extension", extension],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise SystemExit(f"{method} failed:\n{proc.stderr[-3000:]}")
        results[method] = json.loads(proc.stdout.strip().splitlines()[-1])
        print(results[method], file=sys.stderr)
    counts = {r["files"] for r in results.values()}
    ours = results["lakehouse"]
    lines = [
        "# Profile at scale",
        "",
        f"Table: {args.files:,} data files in {args.manifests:,} manifests (one pyiceberg fast append, metadata only), "
        f"identity partition over 100 values. One timed call per method, each in its own process (peak RSS includes "
        f"the interpreter); {dt.date.today()}; {platform.machine()}, {os.cpu_count()} CPUs; extension `{args.extension}`.",
        "",
        "| method | seconds | ratio to lakehouse | entries per second per core | peak RSS MiB | RSS before MiB | files |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for method, r in results.items():
        rate = r["files"] / r["seconds"] / (os.cpu_count() or 1)
        lines.append(f"| {method} | {r['seconds']:.2f} | {r['seconds'] / ours['seconds']:.2f}× | {rate:,.0f} | "
                     f"{r['peak_rss_mib']:,.0f} | {r['rss_before_mib']:,.0f} | {r['files']:,} |")
    lines += ["", "All count the same files: " + ("yes" if len(counts) == 1 else f"NO: {sorted(counts)}"), ""]
    text = "\n".join(lines)
    print(text)
    (REPO_ROOT / "bench" / "results" / "profile_scale.md").write_text(text)


if __name__ == "__main__":
    main()
