#!/usr/bin/env python3
"""Benchmark: the gate on an Iceberg table of a million data files in 2,000 manifests, 1 % of its
partitions degraded — wall time and peak RSS of ``lakehouse_gate`` (dry run and real), the
rewrite's COPY apart, against DuckDB's iceberg extension reading the same manifests.

Usage::

    .venv/bin/python bench/bench_gate_scale.py [--dir /tmp/lakehouse-bench-gate-scale] [--dry-runs 3] [--real-runs 2]

The table (one pyiceberg fast append whose producer writes 2,000 manifests of 500 entries, in a
sqlite ``SqlCatalog``): 100 identity partitions of 10,000 files, each partition's entries in 20
consecutive manifests (as appends by time leave them). Partition ``d=0`` is degraded: its 10,000
files are real Parquet files of 100 rows (about 2 KiB). The other 99 partitions are healthy and
metadata only (128–256 MiB each as the manifests record them; no such file exists: the gate must
never open one). The table is built once and kept under ``--dir`` for the dry runs; each real run
compacts a fresh build of its own (the gate commits). Each call runs in a process of its own
(peak RSS = that process's ``VmHWM``, the interpreter included; the RSS before the call is shown):

1. ``lakehouse_gate(dry_run := true)``: profile, plan (the calibration's sample and the field-id
   checks read a few data files of ``d=0``);
2. ``lakehouse_gate``: the same, then compaction of ``d=0`` (10,000 files into one), the commit,
   the profile after, the merge of the 2,000 small manifests, expiry; the COPY's time is taken
   from DuckDB's query log (from the COPY statement to the next statement our connection runs);
   the same with DuckDB's external file cache off (``SET GLOBAL enable_external_file_cache``), to
   show what of the peak is DuckDB's cache of the files the COPY read;
3. DuckDB's iceberg extension: ``iceberg_metadata`` over the same metadata, counted per partition
   directory (what it takes DuckDB to read the manifests; it plans nothing).

Results go to ``bench/results/gate_scale.md``, every run's figures to ``--dir``/results.json.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT / "bench"))

import benchlib  # noqa: E402

FILES = 1_000_000
MANIFESTS = 2000
PARTITIONS = 100
ROWS_PER_SMALL_FILE = 100


def vm(key: str) -> float:
    """This process's ``key`` from /proc/self/status, MiB."""
    return benchlib.proc_status_kib(key) / 1024


def build(root: Path) -> str:
    """The table under ``root`` (see the module doc); returns its metadata location."""
    import random

    import pyarrow as pa
    import pyarrow.parquet as pq

    per_manifest = FILES // MANIFESTS
    manifests_per_partition = MANIFESTS // PARTITIONS
    rng = random.Random(7)
    arrow_schema = pa.schema([
        pa.field("id", pa.int64(), metadata={"PARQUET:field_id": "1"}),
        pa.field("d", pa.int32(), metadata={"PARQUET:field_id": "2"}),
        pa.field("s", pa.string(), metadata={"PARQUET:field_id": "3"}),
    ])

    def entries(location: str, m: int):
        d = m // manifests_per_partition
        for k in range(per_manifest):
            n = m * per_manifest + k
            path = f"{location}/data/d={d}/{m}-{n}.parquet"
            if d != 0:
                yield path, d, 1_000_000, rng.choice((128, 192, 256)) * benchlib.MIB
                continue
            local = path.removeprefix("file://")
            os.makedirs(os.path.dirname(local), exist_ok=True)
            ids = range(n * ROWS_PER_SMALL_FILE, (n + 1) * ROWS_PER_SMALL_FILE)
            pq.write_table(pa.table({"id": pa.array(ids, pa.int64()), "d": pa.array([0] * len(ids), pa.int32()),
                                     "s": pa.array([f"v{i}" for i in ids])}, schema=arrow_schema), local)
            yield path, d, len(ids), os.path.getsize(local)

    return benchlib.scale_table(root, MANIFESTS, entries)


def child(method: str, root: Path, metadata: str, extension: str) -> dict:
    before = vm("VmRSS")
    if method == "duckdb-iceberg":
        import duckdb

        from bench_object_storage import pip_extension

        con = duckdb.connect()
        for ext in ("avro", "iceberg"):
            con.execute(f"LOAD '{pip_extension(ext)}'")
        started = time.perf_counter()
        files = con.execute(
            "SELECT sum(n) FROM (SELECT regexp_extract(file_path, '.*/', 0) AS dir, count(*) AS n "
            f"FROM iceberg_metadata('{metadata}') WHERE status <> 'DELETED' GROUP BY dir)"
        ).fetchone()[0]
        return {"seconds": time.perf_counter() - started, "files": int(files), "rss_before_mib": before,
                "peak_rss_mib": vm("VmHWM")}
    con = benchlib.lakehouse_connection(extension)
    if method == "gate-no-file-cache":
        con.execute("SET GLOBAL enable_external_file_cache = false")
    con.execute("CALL enable_logging(['QueryLog'])")
    dry = method == "gate-dry"
    started = time.perf_counter()
    rows = benchlib.fetch_dicts(con.execute(
        f"SELECT * FROM lakehouse_gate('scale.t', catalog_uri := {benchlib.quote(benchlib.catalog_uri(root))}, "
        f"dry_run := {str(dry).lower()})"
    ))
    seconds = time.perf_counter() - started
    peak = vm("VmHWM")
    file_cache = con.execute("SELECT coalesce(sum(memory_usage_bytes), 0) FROM duckdb_memory() "
                             "WHERE tag = 'EXTERNAL_FILE_CACHE'").fetchone()[0] / benchlib.MIB
    log = con.execute("SELECT timestamp, message FROM duckdb_logs WHERE type = 'QueryLog' "
                      "AND message NOT LIKE 'SET SESSION%' ORDER BY timestamp").fetchall()
    copy_seconds = 0.0
    for (at, message), (next_at, _) in zip(log, log[1:]):
        if message.startswith("COPY (") and "/dev/null" not in message:
            copy_seconds += (next_at - at).total_seconds()
    degraded = [r for r in rows if r["verdict"] not in (None, "healthy")]
    first = rows[0]
    out = {"seconds": seconds, "copy_seconds": copy_seconds, "rss_before_mib": before, "peak_rss_mib": peak,
           "file_cache_mib": file_cache,
           "partitions": len([r for r in rows if r["partition"] is not None]),
           "degraded": [(r["partition"], r["verdict"], r["files_before"], r["files_after"]) for r in degraded],
           "status": first["status"], "manifests_merged": first["manifests_merged"],
           "compaction_snapshot_id": first["compaction_snapshot_id"]}
    if not dry:
        out.update(commit_manifests(root, first["compaction_snapshot_id"]))
    return out


def commit_manifests(root: Path, snapshot_id: int) -> dict:
    """What the compaction's snapshot wrote (manifests it added) and named as they were."""
    catalog = benchlib.sql_catalog("default", root, root)
    table = catalog.load_table("scale.t")
    snapshot = table.snapshot_by_id(snapshot_id)
    manifests = snapshot.manifests(table.io)
    written = [m for m in manifests if m.added_snapshot_id == snapshot_id]
    return {"commit_manifests_written": len(written), "commit_manifests_named_as_they_were": len(manifests) - len(written),
            "files_after": sum(1 for _ in table.inspect.files().to_pylist())}


def run_child(method: str, root: Path, metadata: str, extension: str) -> dict:
    proc = subprocess.run([sys.executable, __file__, "--child", method, "--root", str(root), "--metadata", metadata,
                           "--extension", extension], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{method} failed:\n{proc.stderr[-3000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    print(method, result, file=sys.stderr)
    return result


def fmt_runs(values: list[float]) -> str:
    return ", ".join(f"{v:.2f}" for v in values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", default="/tmp/lakehouse-bench-gate-scale")
    parser.add_argument("--dry-runs", type=int, default=3)
    parser.add_argument("--real-runs", type=int, default=2)
    parser.add_argument("--extension", default=None)
    parser.add_argument("--output", default=str(REPO_ROOT / "bench" / "results" / "gate_scale.md"))
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--root", help=argparse.SUPPRESS)
    parser.add_argument("--metadata", help=argparse.SUPPRESS)
    args = parser.parse_args()
    extension = str(benchlib.extension_path(args.extension))
    if args.child:
        print(json.dumps(child(args.child, Path(args.root), args.metadata, extension)))
        return
    started_all = time.perf_counter()
    base = Path(args.dir)
    kept = base / "kept"
    facts = kept / "facts.json"
    if not facts.is_file():
        shutil.rmtree(kept, ignore_errors=True)
        started = time.perf_counter()
        metadata = build(kept)
        facts.write_text(json.dumps({"metadata": metadata, "build_s": time.perf_counter() - started}))
    metadata = json.loads(facts.read_text())["metadata"]
    dry, duck, real, uncached = [], [], [], []
    for _ in range(args.dry_runs):
        dry.append(run_child("gate-dry", kept, metadata, extension))
        duck.append(run_child("duckdb-iceberg", kept, metadata, extension))
    for i in range(args.real_runs):
        for method, runs in (("gate", real), ("gate-no-file-cache", uncached)):
            root = base / f"real{i}"
            shutil.rmtree(root, ignore_errors=True)
            real_metadata = build(root)
            runs.append(run_child(method, root, real_metadata, extension))
            shutil.rmtree(root, ignore_errors=True)

    def stats(rows: list[dict], key: str) -> tuple[float, float]:
        values = [r[key] for r in rows]
        return statistics.median(values), max(values)

    dry_med, dry_worst = stats(dry, "seconds")
    duck_med, duck_worst = stats(duck, "seconds")
    real_med, real_worst = stats(real, "seconds")
    copy_med, _ = stats(real, "copy_seconds")
    peak_dry = max(r["peak_rss_mib"] for r in dry)
    peak_real = max(r["peak_rss_mib"] for r in real)
    peak_uncached = max(r["peak_rss_mib"] for r in uncached)
    uncached_med, uncached_worst = stats(uncached, "seconds")
    file_cache = max(r["file_cache_mib"] for r in real)
    lines = [
        "# The gate at a million files",
        "",
        f"Table: {FILES:,} data files in {MANIFESTS:,} manifests (one pyiceberg fast append), {PARTITIONS} identity "
        f"partitions of {FILES // PARTITIONS:,} files, each in {MANIFESTS // PARTITIONS} consecutive manifests; "
        f"`d=0` degraded (its {FILES // PARTITIONS:,} files real, {ROWS_PER_SMALL_FILE} rows, ~2 KiB each), the other "
        "99 healthy and metadata only (no such file exists). Each call in a process of its own (peak RSS = its "
        f"`VmHWM`, the interpreter included); {dt.date.today()}; {benchlib.machine()}; nothing else running; extension "
        f"`{Path(extension).relative_to(REPO_ROOT) if Path(extension).is_relative_to(REPO_ROOT) else extension}`. "
        f"Full run took {(time.perf_counter() - started_all) / 60:.1f} min.",
        "",
        "| call | every run (s) | median s | slowest s | peak RSS MiB (worst) | RSS before MiB |",
        "|---|---|---:|---:|---:|---:|",
        f"| lakehouse_gate, dry run | {fmt_runs([r['seconds'] for r in dry])} | {dry_med:.2f} | {dry_worst:.2f} | "
        f"{peak_dry:,.0f} | {dry[0]['rss_before_mib']:,.0f} |",
        f"| DuckDB iceberg_metadata (reads the manifests, plans nothing) | {fmt_runs([r['seconds'] for r in duck])} | "
        f"{duck_med:.2f} | {duck_worst:.2f} | {max(r['peak_rss_mib'] for r in duck):,.0f} | {duck[0]['rss_before_mib']:,.0f} |",
        f"| lakehouse_gate (compaction, commit, manifest merge, expiry) | {fmt_runs([r['seconds'] for r in real])} | "
        f"{real_med:.2f} | {real_worst:.2f} | {peak_real:,.0f} | {real[0]['rss_before_mib']:,.0f} |",
        f"| … of which the rewrite's COPY (10,000 files into one) | {fmt_runs([r['copy_seconds'] for r in real])} | "
        f"{copy_med:.2f} | {max(r['copy_seconds'] for r in real):.2f} | | |",
        f"| lakehouse_gate, real, `SET GLOBAL enable_external_file_cache = false` | "
        f"{fmt_runs([r['seconds'] for r in uncached])} | {uncached_med:.2f} | {uncached_worst:.2f} | "
        f"{peak_uncached:,.0f} | {uncached[0]['rss_before_mib']:,.0f} |",
        "",
        f"DuckDB's external file cache (on by default; `duckdb_memory()` tag `EXTERNAL_FILE_CACHE`, buffer-pool "
        f"memory bounded by `memory_limit` and evicted under pressure) held up to {file_cache:,.0f} MiB after the real "
        "runs: the pages of the 10,000 files the rewrite's COPY read. The last row is the same run with it off.",
        "",
        "## Targets",
        "",
        "| target | measured | met |",
        "|---|---:|:---:|",
        f"| gate dry run peak RSS < 512 MiB | {peak_dry:,.0f} MiB | {'yes' if peak_dry < 512 else '**no**'} |",
        f"| gate real run peak RSS < 512 MiB | {peak_real:,.0f} MiB (DuckDB's file cache off: {peak_uncached:,.0f} MiB) | "
        f"{'yes' if peak_real < 512 else ('only with the file cache off' if peak_uncached < 512 else '**no**')} |",
        f"| planning (the dry run, median) ≥ 3× faster than DuckDB-iceberg reading the manifests (median) | "
        f"{duck_med / dry_med:.2f}× | {'yes' if duck_med / dry_med >= 3 else '**no**'} |",
        f"| the commit writes manifests only for what it touched | {real[0]['commit_manifests_written']} written, "
        f"{real[0]['commit_manifests_named_as_they_were']} named as they were | "
        f"{'yes' if real[0]['commit_manifests_named_as_they_were'] >= MANIFESTS - MANIFESTS // PARTITIONS else '**no**'} |",
        "",
        "## What each call did (last run)",
        "",
        f"- dry run: {dry[-1]['partitions']} partitions, degraded {dry[-1]['degraded']}; status `{dry[-1]['status']}`.",
        f"- real run: degraded {real[-1]['degraded']}; status `{real[-1]['status']}`; {real[-1]['manifests_merged']} "
        f"small manifests merged after the compaction; the compaction snapshot wrote "
        f"{real[-1]['commit_manifests_written']} manifest(s) and named {real[-1]['commit_manifests_named_as_they_were']} "
        f"as they were; {real[-1]['files_after']:,} data files after.",
        f"- DuckDB-iceberg counted {duck[-1]['files']:,} files.",
        "",
    ]
    benchlib.write_report("\n".join(lines), args.output, base / "results.json",
                          {"dry": dry, "duckdb_iceberg": duck, "real": real, "real_no_file_cache": uncached})


if __name__ == "__main__":
    main()
