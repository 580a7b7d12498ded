#!/usr/bin/env python3
"""A/B: ``lakehouse_fragmentation`` of two builds of the extension on the same table, interleaved.

Usage::

    .venv/bin/python bench/bench_profile_ab.py --a old.duckdb_extension --b new.duckdb_extension [--runs 200]

For telling a real change from a 2-core machine's noise when a refactor must not slow profiling
down: both builds run in one process against the table ``bench_profile.py`` builds (cached under
``--dir``), alternating A-then-B and B-then-A, each run on a fresh connection after one warm-up of
each. Every run is kept; the median, worst and best of each build and the ratio of medians (B/A)
are printed. Both builds must report the same per-partition counts.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_profile  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a", required=True, help="the baseline extension file")
    parser.add_argument("--b", required=True, help="the candidate extension file")
    parser.add_argument("--runs", type=int, default=200, help="timed runs per build")
    parser.add_argument("--dir", default=bench_profile.DEFAULT_DIR, help="the bench table's cache directory")
    args = parser.parse_args(argv)
    builds = {"A": Path(args.a).resolve(), "B": Path(args.b).resolve()}
    for label, path in builds.items():
        if not path.is_file():
            raise SystemExit(f"extension {label} {path} does not exist")
    demo = bench_profile.build_table(Path(args.dir).resolve(), builds["A"], rebuild=False)
    metadata = demo["metadata_location"].removeprefix("file://")
    counts = {label: bench_profile.run_lakehouse(path, metadata) for label, path in builds.items()}
    if counts["A"] != counts["B"]:
        raise SystemExit(f"the builds disagree on per-partition file counts: {counts}")
    times: dict[str, list[float]] = {label: [] for label in builds}
    for i in range(args.runs):
        order = list(builds.items()) if i % 2 == 0 else list(reversed(builds.items()))
        for label, path in order:
            started = time.perf_counter()
            bench_profile.run_lakehouse(path, metadata)
            times[label].append(time.perf_counter() - started)
    print(f"table: {metadata} ({sum(counts['A'].values()):,} data files)")
    for label, path in builds.items():
        ts = times[label]
        print(
            f"{label} {path}: {len(ts)} runs, median {statistics.median(ts) * 1000:.1f} ms, "
            f"worst {max(ts) * 1000:.1f} ms, best {min(ts) * 1000:.1f} ms"
        )
    print("every run (ms), A: " + ", ".join(f"{t * 1000:.1f}" for t in times["A"]))
    print("every run (ms), B: " + ", ".join(f"{t * 1000:.1f}" for t in times["B"]))
    print(f"B/A ratio of medians: {statistics.median(times['B']) / statistics.median(times['A']):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
