#!/usr/bin/env python3
"""Benchmark: the gate's own overhead — `lakehouse_gate` against `lakehouse_compact` +
`lakehouse_expire_snapshots` alone on the same table.

Usage::

    .venv/bin/python bench/bench_gate.py [--dir /tmp/lakehouse-bench-gate] [--scale 0.05] [--files 4] [--repeat 3]

The table is ``lakehouse_demo(<dir>/pristine, scale := --scale, file_multiplier := --files)``
(two fragmented partitions of small files, two healthy ones, 16 snapshots over 14 days), built
once and cached. Each run restores a byte-identical copy at the same path (metadata holds
absolute paths), flushes it (``sync``), and times in a fresh DuckDB connection (LOAD included):

1. **gate**: ``lakehouse_gate(t, small_file_threshold_mb := 64 × scale, target_file_size_mb :=
   128 × scale)`` — profile, plan, measured scans before and after (with the row count and
   checksum verification), compaction, manifest check, expiry, re-profile, scorecard (no Slack);
2. **gate, measure_speedup := false**: the same without the measured scans;
3. **compact + expire**: ``lakehouse_compact`` then ``lakehouse_expire_snapshots`` with the same
   thresholds and retention (7 days), the two calls timed together.

Methods alternate within each repeat; medians are reported, and the overhead is
``gate / (compact + expire) − 1``. Results go to ``bench/results/gate.md``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import shutil
import statistics
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def connect(extension: str):
    import duckdb

    con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
    con.execute(f"LOAD '{extension}'")
    return con


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", default="/tmp/lakehouse-bench-gate")
    parser.add_argument("--scale", type=float, default=0.05)
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--extension", default=os.environ.get("LAKEHOUSE_EXTENSION", "build/release/lakehouse.duckdb_extension"))
    args = parser.parse_args()
    import duckdb

    extension = str(Path(args.extension).resolve())
    root = Path(args.dir)
    pristine = root / f"pristine-{args.scale}-{args.files}"
    table = root / "table"
    if not pristine.is_dir():
        shutil.rmtree(table, ignore_errors=True)
        root.mkdir(parents=True, exist_ok=True)
        connect(extension).execute(
            f"SELECT * FROM lakehouse_demo('{table}', scale := {args.scale}, file_multiplier := {args.files})"
        ).fetchall()
        table.rename(pristine)
    data_bytes = sum(p.stat().st_size for p in (pristine / "data").rglob("*.parquet"))
    data_files = sum(1 for _ in (pristine / "data").rglob("*.parquet"))
    small, target = 64 * args.scale, 128 * args.scale
    thresholds = f"small_file_threshold_mb := {small}, target_file_size_mb := {target}"

    def restore() -> None:
        shutil.rmtree(table, ignore_errors=True)
        shutil.copytree(pristine, table)
        os.sync()

    def gate(measure: bool) -> tuple[float, dict]:
        started = time.perf_counter()
        con = connect(extension)
        cur = con.execute(
            f"SELECT * FROM lakehouse_gate('{table}', {thresholds}, snapshot_retention_days := 7, "
            f"measure_speedup := {str(measure).lower()})"
        )
        names = [d[0] for d in cur.description]
        row = dict(zip(names, cur.fetchall()[0]))
        return time.perf_counter() - started, row

    def alone() -> tuple[float, dict]:
        started = time.perf_counter()
        con = connect(extension)
        compacted = con.execute(f"SELECT sum(input_files), sum(output_files) FROM lakehouse_compact('{table}', {thresholds})").fetchone()
        expired = con.execute(
            f"SELECT count(*) FILTER (kind = 'snapshot') FROM lakehouse_expire_snapshots('{table}', snapshot_retention_days := 7)"
        ).fetchone()
        return time.perf_counter() - started, {"input_files": compacted[0], "output_files": compacted[1], "expired": expired[0]}

    times: dict[str, list[float]] = {"gate": [], "gate_no_scan": [], "alone": []}
    detail: dict[str, dict] = {}
    started_all = time.perf_counter()
    for _ in range(args.repeat):
        for name, run in (("gate", lambda: gate(True)), ("gate_no_scan", lambda: gate(False)), ("alone", alone)):
            restore()
            seconds, info = run()
            times[name].append(seconds)
            detail[name] = info
    med = {k: statistics.median(v) for k, v in times.items()}
    g, a = detail["gate"], detail["alone"]
    if (g["snapshots_expired"], detail["gate_no_scan"]["snapshots_expired"]) != (a["expired"], a["expired"]):
        raise SystemExit(f"the runs expired different snapshots: gate {g['snapshots_expired']}, alone {a['expired']}")
    lines = [
        "# Gate overhead benchmark",
        "",
        f"Table: `lakehouse_demo(scale := {args.scale}, file_multiplier := {args.files})` — {data_files} data files, "
        f"{data_bytes / 2**20:,.1f} MiB; thresholds {small:g} / {target:g} MiB; retention 7 days. Each run: a fresh "
        f"copy, a fresh connection (LOAD included). {args.repeat} repeats, medians.",
        "",
        f"{dt.date.today()}; {platform.machine()}, {os.cpu_count()} CPUs; duckdb {duckdb.__version__}; extension "
        f"`{args.extension}`. Full run {time.perf_counter() - started_all:.0f} s. Command: `make bench` (or "
        "`.venv/bin/python bench/bench_gate.py`).",
        "",
        "| method | seconds (median) | all runs | vs compact + expire |",
        "|---|---:|---|---:|",
    ]
    for name, label in (("gate", "lakehouse_gate (measured scans)"), ("gate_no_scan", "lakehouse_gate, measure_speedup := false"),
                        ("alone", "lakehouse_compact + lakehouse_expire_snapshots")):
        runs = ", ".join(f"{t:.2f}" for t in times[name])
        lines.append(f"| {label} | {med[name]:.2f} | {runs} | {med[name] / med['alone'] - 1:+.0%} |")
    lines += [
        "",
        f"Both compacted {a['input_files']} small files into {a['output_files']} and expired {a['expired']} snapshots; "
        f"the gate's scans: {g['scan_before_ms']:.0f} ms before, {g['scan_after_ms']:.0f} ms after "
        f"(measured speedup {g['measured_speedup']:.2f}×, rows and checksum verified).",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    (REPO_ROOT / "bench" / "results" / "gate.md").write_text(text)


if __name__ == "__main__":
    main()
