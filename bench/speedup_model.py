"""The scan cost model behind the projected speedup (src/plan/projection.rs), measured.

Part 1 times a full scan (count and hash of every column, as the gate's scan) of 2,000,000 rows
written as 1, 8, 64, 512 and 2,048 Parquet files, and of 20,000 and 200,000 rows as 1 and 256
files (so that bytes and files vary apart), with DuckDB, and fits
t = query + per_file * files + per_mib * MiB. Part 2 runs the demo table through the gate at the
demo's scaled thresholds (LAKEHOUSE_EXTENSION, default build/debug) a few times and prints the
measured speedup beside the projected range.

    .venv/bin/python bench/speedup_model.py [runs]
"""

from __future__ import annotations

import glob
import os
import shutil
import sys
import tempfile
import time

import duckdb

ROWS = 2_000_000


def write(con, n_files: int, d: str, rows: int) -> int:
    os.makedirs(d)
    per = rows // n_files
    for i in range(n_files):
        con.execute(
            f"COPY (SELECT (range + {i * per})::BIGINT AS id, 'customer_' || (range % 997) AS customer, "
            f"random() * 1000 AS amount, TIMESTAMP '2026-10-01' + to_seconds(range) AS ts FROM range({per})) "
            f"TO '{d}/f{i:05d}.parquet' (FORMAT parquet)"
        )
    return sum(os.path.getsize(f) for f in glob.glob(f"{d}/*.parquet"))


def scan_ms(con, d: str) -> float:
    files = ",".join(f"'{f}'" for f in sorted(glob.glob(f"{d}/*.parquet")))
    sql = f"SELECT count(*), sum(hash(id, customer, amount, ts)) FROM read_parquet([{files}])"
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        con.execute(sql).fetchall()
        best = min(best, time.perf_counter() - started)
    return best * 1000


def cost_model() -> None:
    con = duckdb.connect()
    con.execute("SET threads = 2")
    root = tempfile.mkdtemp(prefix="speedup_model_")
    points = []
    shapes = [(ROWS, n) for n in (1, 8, 64, 512, 2048)] + [(20_000, 1), (200_000, 1), (200_000, 256)]
    for rows, n in shapes:
        d = f"{root}/{rows}_{n}"
        size = write(con, n, d, rows)
        t = scan_ms(con, d)
        points.append((n, size / 2**20, t))
        print(f"{rows:9d} rows {n:5d} files  {size / 2**20:6.2f} MiB  {t:7.1f} ms", flush=True)
    shutil.rmtree(root)
    # Least squares t = q + a * files + b * mib (numpy-free: the 3x3 normal equations).
    xs = [(1.0, n, mib) for n, mib, _ in points]
    ata = [[sum(x[i] * x[j] for x in xs) for j in range(3)] for i in range(3)]
    atb = [sum(x[i] * t for x, (_, _, t) in zip(xs, points)) for i in range(3)]
    for col in range(3):
        pivot = max(range(col, 3), key=lambda r: abs(ata[r][col]))
        ata[col], ata[pivot], atb[col], atb[pivot] = ata[pivot], ata[col], atb[pivot], atb[col]
        for r in range(3):
            if r != col:
                f = ata[r][col] / ata[col][col]
                ata[r] = [a - f * c for a, c in zip(ata[r], ata[col])]
                atb[r] -= f * atb[col]
    q, a, b = (atb[i] / ata[i][i] for i in range(3))
    print(f"fit: {q:.2f} ms per query, {a:.3f} ms per file, {b:.2f} ms per MiB: "
          f"a file costs {a / b:.3f} MiB, a query {q / b:.2f} MiB", flush=True)


def demo(runs: int) -> None:
    ext = os.environ.get("LAKEHOUSE_EXTENSION", "build/debug/lakehouse.duckdb_extension")
    scaled = "small_file_threshold_mb := 0.064, target_file_size_mb := 0.128"
    for _ in range(runs):
        root = tempfile.mkdtemp(prefix="speedup_demo_")
        path = f"{root}/demo"
        con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
        con.execute(f"LOAD '{ext}'")
        con.execute(f"SELECT * FROM lakehouse_demo('{path}')").fetchall()
        low, high = con.execute(
            f"SELECT projected_speedup_low, projected_speedup_high FROM lakehouse_fragmentation_summary('{path}', {scaled})"
        ).fetchone()
        measured, before, after = con.execute(
            f"SELECT any_value(measured_speedup), any_value(scan_before_ms), any_value(scan_after_ms) "
            f"FROM lakehouse_gate('{path}', {scaled})"
        ).fetchone()
        print(f"demo: projected {low}x to {high}x, measured {measured}x ({before} ms -> {after} ms)", flush=True)
        shutil.rmtree(root)


if __name__ == "__main__":
    cost_model()
    demo(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
