#!/usr/bin/env python3
"""Benchmark: the webhook server's request latency, and a triggered gate run against the same
gate as a SQL call.

Usage::

    .venv/bin/python bench/bench_serve.py [--repeat 5] [--requests 2000]

1. Latency of `GET /healthz`, of an authenticated `GET /v1/runs/{id}` and of a refused
   (wrong-key) `POST /v1/tables/{t}/gate`, `--requests` each from 8 client threads on loopback,
   p50/p99, while the server is idle.
2. The same gate on fresh copies of the demo table (`lakehouse_demo`, scaled thresholds): as
   `SELECT * FROM lakehouse_gate(…)` in a DuckDB connection, and as `POST …/gate` followed by
   polling `GET /v1/runs/{id}` every 10 ms until it finished (what a CDC pipeline waiting for
   the result sees). Median of `--repeat` runs each; the difference is the server's overhead.

Writes ``bench/results/serve.md``.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime as dt
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

import duckdb

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT / "test" / "integration"))

from test_serve import KEY, Server, bearer, gate_path, request  # noqa: E402

SCALED = "small_file_threshold_mb := 0.064, target_file_size_mb := 0.128"
OUTPUT = REPO_ROOT / "bench" / "results" / "serve.md"


def extension_path(explicit: str | None) -> Path:
    for candidate in (explicit, os.environ.get("LAKEHOUSE_EXTENSION"), "build/release/lakehouse.duckdb_extension"):
        if candidate and (REPO_ROOT / candidate).is_file():
            return (REPO_ROOT / candidate).resolve()
    raise SystemExit("no release build: run make release")


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return ordered[len(ordered) // 2] * 1000, ordered[int(len(ordered) * 0.99)] * 1000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--extension")
    parser.add_argument("--output", default=str(OUTPUT))
    args = parser.parse_args(argv)
    ext = extension_path(args.extension)
    work = Path(tempfile.mkdtemp(prefix="lakehouse-bench-serve-"))
    con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
    con.execute(f"LOAD '{ext}'")
    con.execute("SET enable_progress_bar = false")
    pristine = work / "pristine"
    con.execute(f"SELECT * FROM lakehouse_demo('{pristine}')").fetchall()
    copies = [work / f"t{i}" for i in range(2 * args.repeat)]
    for path in copies:
        shutil.copytree(pristine, path)

    sql_times = []
    for path in copies[: args.repeat]:
        t = time.perf_counter()
        con.execute(f"SELECT * FROM lakehouse_gate('{path}', {SCALED})").fetchall()
        sql_times.append(time.perf_counter() - t)

    os.environ["LAKEHOUSE_WEBHOOK_KEY"] = KEY
    served = [str(p) for p in copies[args.repeat:]]
    server = Server(ext, work, served, extra=f", {SCALED}")
    server.wait_ready()
    try:
        trigger_times = []
        last_id = None
        for table in served:
            t = time.perf_counter()
            status, body = request(server.port, "POST", gate_path(table), headers=bearer())
            assert status == 202, body
            last_id = json.loads(body)["execution_id"]
            while True:
                run = json.loads(request(server.port, "GET", f"/v1/runs/{last_id}", headers=bearer())[1])
                if run["status"] in ("succeeded", "failed"):
                    break
                time.sleep(0.01)
            trigger_times.append(time.perf_counter() - t)
            assert run["status"] == "succeeded", run

        def timed(method: str, path: str, headers: dict) -> float:
            t = time.perf_counter()
            request(server.port, method, path, headers=headers)
            return time.perf_counter() - t

        latency = {}
        cases = {
            "GET /healthz": ("GET", "/healthz", {}),
            "GET /v1/runs/{id} (Bearer)": ("GET", f"/v1/runs/{last_id}", bearer()),
            "POST …/gate, wrong key (401)": ("POST", gate_path(served[0]), bearer("wrong-key-0123456789abcdef")),
        }
        for label, (method, path, headers) in cases.items():
            with concurrent.futures.ThreadPoolExecutor(8) as pool:
                samples = list(pool.map(lambda _: timed(method, path, headers), range(args.requests)))
            latency[label] = percentiles(samples)
    finally:
        result = server.stop()
        shutil.rmtree(work, ignore_errors=True)
    assert all(r[2] == "succeeded" for r in result["rows"]), result

    sql_median, trigger_median = statistics.median(sql_times), statistics.median(trigger_times)
    lines = [
        "# Webhook server: request latency and a triggered run's overhead",
        "",
        f"`bench/bench_serve.py --repeat {args.repeat} --requests {args.requests}`, {dt.date.today()}, "
        f"{platform.machine()}, {os.cpu_count()} cores, release build, loopback, Python http.client as the client.",
        "",
        f"## Latency ({args.requests} requests each, 8 client threads, server idle)",
        "",
        "| request | p50 ms | p99 ms |",
        "|---|---:|---:|",
    ]
    lines += [f"| {label} | {p50:.2f} | {p99:.2f} |" for label, (p50, p99) in latency.items()]
    lines += [
        "",
        f"## The gate on the demo table (fresh copy each run, median of {args.repeat})",
        "",
        "| how | seconds | vs SQL |",
        "|---|---:|---:|",
        f"| `SELECT * FROM lakehouse_gate(…)` | {sql_median:.3f} | 1.00x |",
        f"| `POST …/gate`, then `GET /v1/runs/{{id}}` every 10 ms until done | {trigger_median:.3f} | "
        f"{trigger_median / sql_median:.2f}x |",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    Path(args.output).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
