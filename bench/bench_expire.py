#!/usr/bin/env python3
"""Benchmark: expiring snapshots of a 2,000-snapshot Iceberg table, lakehouse vs pyiceberg.

Usage::

    .venv/bin/python bench/bench_expire.py [--dir /tmp/lakehouse-bench] [--snapshots 2000] [--rebuild]

The table is written once by ``lakehouse_demo(…, scale := 0.0001, snapshots := 2000,
history_days := 14)`` (2,000 snapshots spread evenly over 14 days, so about half are past the
7-day retention) and cached under ``--dir`` with a pristine copy. Before each method the table
is restored from that copy at the same path (metadata holds absolute paths) and registered in
a fresh sqlite ``SqlCatalog``; each method then runs in a process of its own (peak RSS is per
method):

1. lakehouse: ``SELECT * FROM lakehouse_expire_snapshots('bench.expire', snapshot_retention_days := 7)``
   — commits and deletes the files only expired snapshots reached (here their manifest lists
   and the metadata files that fall out of the log);
2. lakehouse, dry run (the same selection and reachability, nothing committed or deleted);
3. pyiceberg: ``load_table`` + ``maintenance.expire_snapshots().older_than(now - 7 days).commit()``
   — metadata only: pyiceberg deletes no files.

Both must leave the same snapshots. A markdown table with the times, the ratio to lakehouse
and peak RSS is printed and written to ``bench/results/expire.md``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_profile import extension_path  # noqa: E402

DEFAULT_DIR = "/tmp/lakehouse-bench"
DEFAULT_OUTPUT = REPO_ROOT / "bench" / "results" / "expire.md"
NAMESPACE, TABLE_NAME = "bench", "expire"
RETENTION_DAYS = 7
METHODS = ["lakehouse", "lakehouse_dry_run", "pyiceberg"]


def peak_rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def connect(extension: str):
    import duckdb

    con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
    con.execute(f"LOAD '{extension}'")
    return con


def catalog(workdir: Path):
    from pyiceberg.catalog.sql import SqlCatalog

    return SqlCatalog("default", uri=f"sqlite:///{workdir}/catalog.db", warehouse=f"file://{workdir}")


def build(bench_dir: Path, snapshots: int, extension: str, rebuild: bool) -> dict:
    """The pristine table (cached) and its facts."""
    pristine = bench_dir / f"expire-{snapshots}-pristine"
    facts_path = bench_dir / f"expire-{snapshots}.json"
    if rebuild or not facts_path.is_file() or not pristine.is_dir():
        shutil.rmtree(pristine, ignore_errors=True)
        table = bench_dir / f"expire-{snapshots}"
        shutil.rmtree(table, ignore_errors=True)
        started = time.perf_counter()
        con = connect(extension)
        (md,) = con.execute(
            f"SELECT metadata_location FROM lakehouse_demo('{table}', scale := 0.0001, "
            f"snapshots := {snapshots}, history_days := 14)").fetchone()
        con.close()
        table.rename(pristine)
        facts = {"metadata_file": Path(md).name, "build_s": round(time.perf_counter() - started, 1),
                 "built": dt.date.today().isoformat()}
        facts_path.write_text(json.dumps(facts))
    facts = json.loads(facts_path.read_text())
    facts["pristine"] = str(pristine)
    facts["table"] = str(bench_dir / f"expire-{snapshots}")
    facts["metadata_bytes"] = sum(p.stat().st_size for p in (pristine / "metadata").iterdir())
    facts["metadata_files"] = len(list((pristine / "metadata").iterdir()))
    return facts


def restore(facts: dict, workdir: Path) -> None:
    """The table at its own path as built, registered in a fresh catalog under `workdir`."""
    table = Path(facts["table"])
    shutil.rmtree(table, ignore_errors=True)
    shutil.copytree(facts["pristine"], table)
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    cat = catalog(workdir)
    cat.create_namespace(NAMESPACE)
    cat.register_table(f"{NAMESPACE}.{TABLE_NAME}", str(table / "metadata" / facts["metadata_file"]))
    os.sync()


def child(method: str, workdir: Path, extension: str) -> dict:
    """Runs one method; prints a JSON result line."""
    uri = f"sqlite:///{workdir}/catalog.db"
    started = time.perf_counter()
    if method.startswith("lakehouse"):
        con = connect(extension)
        dry = "true" if method == "lakehouse_dry_run" else "false"
        rows = con.execute(
            f"SELECT kind, count(*) FROM lakehouse_expire_snapshots('{NAMESPACE}.{TABLE_NAME}', "
            f"catalog_uri := '{uri}', snapshot_retention_days := {RETENTION_DAYS}, dry_run := {dry}) "
            "GROUP BY kind").fetchall()
        counts = dict(rows)
    else:
        table = catalog(workdir).load_table(f"{NAMESPACE}.{TABLE_NAME}")
        cutoff = dt.datetime.now() - dt.timedelta(days=RETENTION_DAYS)
        before = len(table.metadata.snapshots)
        table.maintenance.expire_snapshots().older_than(cutoff).commit()
        after = len(catalog(workdir).load_table(f"{NAMESPACE}.{TABLE_NAME}").metadata.snapshots)
        counts = {"snapshot": before - after}
    seconds = time.perf_counter() - started
    return {"method": method, "seconds": seconds, "counts": counts, "peak_rss_mib": peak_rss_mib()}


def remaining_snapshots(workdir: Path) -> list[int]:
    table = catalog(workdir).load_table(f"{NAMESPACE}.{TABLE_NAME}")
    return sorted(s.snapshot_id for s in table.metadata.snapshots)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dir", default=DEFAULT_DIR)
    parser.add_argument("--snapshots", type=int, default=2000)
    parser.add_argument("--rebuild", action="store_true")
    parser.add_argument("--repeat", type=int, default=5, help="runs per method (alternating); the median counts")
    parser.add_argument("--extension")
    parser.add_argument("--output", default=str(DEFAULT_OUTPUT))
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--workdir", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    extension = str(extension_path(args.extension))
    if args.child:
        print(json.dumps(child(args.child, Path(args.workdir), extension)))
        return 0

    bench_dir = Path(args.dir)
    bench_dir.mkdir(parents=True, exist_ok=True)
    facts = build(bench_dir, args.snapshots, extension, args.rebuild)
    runs: dict[str, list[dict]] = {m: [] for m in METHODS}
    remaining = {}
    for _ in range(max(1, args.repeat)):
        for method in METHODS:
            workdir = bench_dir / f"expire-work-{method}"
            restore(facts, workdir)
            proc = subprocess.run([sys.executable, __file__, "--child", method, "--workdir", str(workdir),
                                   "--extension", extension], capture_output=True, text=True)
            if proc.returncode != 0:
                print(proc.stdout, proc.stderr, file=sys.stderr)
                raise SystemExit(f"{method} failed")
            runs[method].append(json.loads(proc.stdout.strip().splitlines()[-1]))
            remaining[method] = remaining_snapshots(workdir)
            print(f"{method}: {runs[method][-1]['seconds']:.2f} s, {runs[method][-1]['counts']}", file=sys.stderr)
    import statistics

    results = {}
    for method, rs in runs.items():
        median = statistics.median(r["seconds"] for r in rs)
        results[method] = {**min(rs, key=lambda r: abs(r["seconds"] - median)), "seconds": median,
                           "all": [r["seconds"] for r in rs]}
    problems = []
    if remaining["lakehouse"] != remaining["pyiceberg"]:
        problems.append("lakehouse and pyiceberg keep different snapshots")
    if remaining["lakehouse_dry_run"] == remaining["lakehouse"]:
        problems.append("the dry run expired snapshots")
    shutil.rmtree(facts["table"], ignore_errors=True)

    import duckdb
    import pyiceberg

    ours = results["lakehouse"]["seconds"]
    lines = [
        "# Snapshot expiry benchmark",
        "",
        f"Table: `lakehouse_demo(scale := 0.0001, snapshots := {args.snapshots}, history_days := 14)` — "
        f"{args.snapshots} snapshots over 14 days, {facts['metadata_files']} metadata files "
        f"({facts['metadata_bytes'] / 1024 / 1024:.0f} MiB); retention {RETENTION_DAYS} days.",
        "",
        f"{args.repeat} runs per method (alternating), each in its own process on a fresh copy, median shown; "
        f"{dt.date.today().isoformat()}; "
        f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; "
        f"duckdb {duckdb.__version__}, pyiceberg {pyiceberg.__version__}; extension `{Path(extension).relative_to(REPO_ROOT) if Path(extension).is_relative_to(REPO_ROOT) else extension}`.",
        "",
        "| method | seconds (median) | ratio to lakehouse | peak RSS MiB | snapshots expired | files deleted | all runs |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for method in METHODS:
        r = results[method]
        files = sum(v for k, v in r["counts"].items() if k != "snapshot")
        lines.append(f"| {method} | {r['seconds']:.2f} | {r['seconds'] / ours:.2f}× | {r['peak_rss_mib']:.0f} | "
                     f"{r['counts'].get('snapshot', 0)} | {files if method != 'pyiceberg' else 'none (metadata only)'} | "
                     + ", ".join(f"{s:.2f}" for s in r["all"]) + " |")
    lines += ["", "Both leave the same snapshots: " + ("yes" if not problems else "NO — " + "; ".join(problems))]
    text = "\n".join(lines) + "\n"
    print(text)
    Path(args.output).write_text(text)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
