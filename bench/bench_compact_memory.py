#!/usr/bin/env python3
"""Benchmark: compacting 10 GiB in 40 degraded partitions under ``SET memory_limit = '1GB'`` —
peak RSS, throughput against the bare DuckDB COPY floor, and output file sizes (issue 16).

Usage::

    .venv/bin/python bench/bench_compact_memory.py [--dir /tmp/lakehouse-bench-memory] [--gib 10] [--partitions 40]
        [--memory-limit 1GB] [--threads 2] [--repeat 1] [--methods floor,lakehouse] [--rebuild] [--keep]

The goal measured: "Compaction of 10 GiB in 40 degraded partitions with ``SET memory_limit =
'1GB'``: peak RSS stays under the limit plus a fixed margin; throughput within 15 % of the floor;
output files within ±25 % of the target for ≥ 90 % of them."

Source data, written once by DuckDB and cached under ``--dir`` (``source/``, made read-only):
``--gib`` GiB of Parquet (zstd, Iceberg's default codec, DuckDB's default row groups, Iceberg field
ids 1…9) in small files of 8–16 MiB each (sizes drawn from a seeded generator), evenly spread over
``--partitions`` identity partitions ``event_date`` = 2026-01-01, 2026-01-02, … — every partition
is degraded (all its files are under the 64 MiB small-file threshold). Columns: ``id BIGINT``
(unique), ``event_date DATE``, ``user_id INTEGER``, ``event_time TIMESTAMP``, ``amount DOUBLE``,
``score DOUBLE``, ``event_type VARCHAR`` (8 values), ``payload VARCHAR`` (md5 hex),
``note VARCHAR`` (8–55 hex characters, 10 % NULL): all derived from hashes of the row number,
so the data does not compress to nothing (≈ 49 bytes a row) and is the same on every build.
The source's checksums are computed once with ``read_parquet`` and once through DuckDB's iceberg
extension (``iceberg_scan``) on a table registering the files, and must agree.

The pristine copy is the source itself: the lakehouse run's table (a pyiceberg ``SqlCatalog`` in
the run's directory, identity-partitioned on ``event_date``) registers the source files where
they lie with ``add_files``; compaction writes its new files under the run's table location and
never deletes its inputs (they stay for older snapshots), so a fresh run only needs a fresh
catalog (untimed setup, in a process of its own). The floor reads the same files.

Methods, each timed in a FRESH process of its own that first runs ``SET memory_limit = '1GB'``
and ``SET threads = 2`` (the connect, settings and LOAD are timed, as in bench_compact.py):

1. **floor**: bare DuckDB, no metadata: per partition ``COPY (SELECT * FROM read_parquet([<its
   files>])) TO '<out>/<partition>' (FORMAT parquet, COMPRESSION zstd, FILE_SIZE_BYTES '128MiB')``
   (bench_compact.py's floor, cut into files of the target size by DuckDB itself);
2. **lakehouse**: ``lakehouse_compact('ns.t', catalog_uri := …, target_file_size_mb := 128)``
   (its other options at their defaults: small-file threshold 64 MiB).

Peak RSS is the child's ``VmHWM`` (the Python interpreter, DuckDB and the extension included). The
fixed margin the goal allows over the limit is taken as the RSS of the same process once it has
connected, set the limits and loaded the extension, before the timed call (``ready``): what any
DuckDB session with the extension costs before it does any work. A sampler thread records VmRSS,
DuckDB's own accounting (``duckdb_memory()``: buffer-managed memory and temporary storage) and how
many output files exist, every 0.25 s (``--dir``/``runs/<method>-<run>-timeline.csv``), to show which
phase peaks. MiB/s is the MiB of input files rewritten per second. Output files are the new data
files (lakehouse: the table's live files after the commit; floor: the files COPY wrote): count,
share within ±25 % of the target, min / median / max.

Validation (untimed, own process): the compacted table read through DuckDB's iceberg extension
(``iceberg_scan`` of the new metadata; the floor: ``read_parquet`` of its output) must give the
source's row count, rows per partition and checksums (sums of ``id``, ``user_id``, ``amount``,
non-null ``note``s, min/max ``payload``, and the exact sum of a hash of every row's columns).

Results are printed and written to ``bench/results/compact_memory.md``. Disk: the source (``--gib``)
plus one method's output at a time (removed after validation unless ``--keep``). The extension
comes from ``--extension``, else ``$LAKEHOUSE_EXTENSION``, else ``build/release/lakehouse.duckdb_extension``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import random
import resource
import shutil
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT / "bench"))
import benchlib  # noqa: E402
from benchlib import GIB, MIB, catalog_uri, extension_path, fetch_dicts, iceberg_connection, iceberg_files  # noqa: E402
from benchlib import lakehouse_connection, machine, proc_status_kib, quote, quote_list, register_files  # noqa: E402
from benchlib import run_methods, selected_methods, size_spread, snapshot_operation, write_report  # noqa: E402

DEFAULT_DIR = "/tmp/lakehouse-bench-memory"
DEFAULT_OUTPUT = REPO_ROOT / "bench" / "results" / "compact_memory.md"

NAMESPACE, TABLE_NAME, CATALOG_NAME = "ns", "t", "default"
TARGET_FILE_SIZE_MB = 128
SIZE_TOLERANCE = 0.25  # an output file is "on target" within ±25 % of the target
ON_TARGET_SHARE_GOAL = 0.90
FLOOR_OVERHEAD_GOAL = 0.15
SOURCE_FILE_MIB = (8, 16)  # source file sizes, drawn uniformly
FIRST_DATE = dt.date(2026, 1, 1)
SOURCE_VERSION = 1  # bump when the generated data changes
METHODS = ["floor", "lakehouse"]
SAMPLE_SECONDS = 0.25
SPIN_CPU_RATIO = 1.5  # a lakehouse run using more CPU than this times the floor's is flagged
FIELD_IDS = ("{id: 1, event_date: 2, user_id: 3, event_time: 4, amount: 5, score: 6, event_type: 7, "
             "payload: 8, note: 9}")
COLUMNS = "id, event_date, user_id, event_time, amount, score, event_type, payload, note"


# --------------------------------------------------------------------------- small helpers


def cpu_seconds() -> float:
    """User + system CPU seconds of this process so far (every thread)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def dates(partitions: int) -> list[str]:
    return [(FIRST_DATE + dt.timedelta(days=n)).isoformat() for n in range(partitions)]


def duckdb_settings(memory_limit: str, threads: int) -> list[str]:
    """The statements that put a timed process under the limits."""
    return [f"SET memory_limit = {quote(memory_limit)}", f"SET threads = {int(threads)}"]


def limit_bytes(memory_limit: str) -> int:
    """What DuckDB makes of ``memory_limit`` (its 'GB' is 1000³ bytes, 'GiB' 1024³), in bytes."""
    import duckdb

    con = duckdb.connect()
    con.execute(f"SET memory_limit = {quote(memory_limit)}")
    text = con.execute("SELECT current_setting('memory_limit')").fetchone()[0]
    con.close()
    number, unit = text.split()
    scale = {"bytes": 1, "KiB": 1024, "MiB": MIB, "GiB": GIB, "TiB": 1024 * GIB,
             "KB": 1000, "MB": 1000**2, "GB": 1000**3, "TB": 1000**4}[unit]
    return round(float(number) * scale)


# --------------------------------------------------------------------------- checksums (DuckDB)


def checksum_sql(source: str) -> tuple[str, str]:
    """Totals, and rows per partition, of the rows of ``source`` (a FROM clause)."""
    totals = (
        "SELECT count(*), sum(id), sum(user_id), sum(amount), count(note), min(payload), max(payload), "
        f"sum(hash({COLUMNS})) FROM {source}"
    )
    per_partition = f"SELECT event_date::VARCHAR, count(*) FROM {source} GROUP BY ALL ORDER BY ALL"
    return totals, per_partition


def checksum(con: Any, source: str) -> dict[str, Any]:
    totals, per_partition = checksum_sql(source)
    row = con.execute(totals).fetchone()
    return {
        "rows": int(row[0]),
        "sum_id": int(row[1]),
        "sum_user_id": int(row[2]),
        "sum_amount": float(row[3]),
        "non_null_note": int(row[4]),
        "min_payload": row[5],
        "max_payload": row[6],
        "sum_row_hash": int(row[7]),
        "rows_by_partition": {d: int(n) for d, n in con.execute(per_partition).fetchall()},
    }


def compare_checksums(got: dict[str, Any], want: dict[str, Any]) -> list[str]:
    problems = []
    for key in ("rows", "rows_by_partition", "sum_id", "sum_user_id", "non_null_note", "min_payload", "max_payload",
                "sum_row_hash"):
        if got[key] != want[key]:
            shown = (lambda v: v if not isinstance(v, dict) else f"{len(v)} partitions, {sum(v.values())} rows")
            problems.append(f"{key}: got {shown(got[key])!r}, source {shown(want[key])!r}")
    if not math.isclose(got["sum_amount"], want["sum_amount"], rel_tol=1e-9, abs_tol=1e-6):
        problems.append(f"sum_amount: got {got['sum_amount']!r}, source {want['sum_amount']!r}")
    return problems


# --------------------------------------------------------------------------- source data


def generated(offset: int, rows: int, date: str) -> str:
    """``rows`` rows of partition ``date``, ids from ``offset``; deterministic (hashes, no random())."""
    n = f"({offset} + i)"
    return (
        f"SELECT {n}::BIGINT AS id, DATE '{date}' AS event_date, "
        f"(hash({n}, 1) % 5000000)::INTEGER AS user_id, "
        f"DATE '{date}' + to_microseconds((hash({n}, 2) % 86400000000)::BIGINT) AS event_time, "
        f"(hash({n}, 3) % 10000000)::DOUBLE / 100 AS amount, "
        f"(hash({n}, 6) % 1000000007)::DOUBLE / 1000000007 AS score, "
        f"['click', 'view', 'purchase', 'signup', 'logout', 'search', 'share', 'refund'][1 + (hash({n}, 4) % 8)::INTEGER] AS event_type, "
        f"md5({n}::VARCHAR) AS payload, "
        f"CASE WHEN hash({n}, 5) % 10 = 0 THEN NULL ELSE substr(md5({n}::VARCHAR || 'n') || md5({n}::VARCHAR || 'm'), 1, "
        f"8 + (hash({n}, 7) % 48)::INTEGER) END AS note "
        f"FROM range(0, {rows}) t(i) ORDER BY i"
    )


def write_file(con: Any, path: Path, query: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    con.execute(f"COPY ({query}) TO {quote(str(path))} (FORMAT parquet, COMPRESSION zstd, FIELD_IDS {FIELD_IDS})")


def bytes_per_row(con: Any, probe_dir: Path) -> float:
    """From a calibration write of one file of the source's kind."""
    rows = 1_000_000
    probe = probe_dir / f"probe-{os.getpid()}.parquet"
    write_file(con, probe, generated(0, rows, FIRST_DATE.isoformat()))
    try:
        return probe.stat().st_size / rows
    finally:
        probe.unlink()


def build_source(bench_dir: Path, gib: float, partitions: int, rebuild: bool) -> dict[str, Any]:
    """Writes (or reuses) the source files; returns the manifest (``source.json``)."""
    import duckdb

    marker = bench_dir / "source.json"
    params = {"gib": gib, "partitions": partitions, "file_mib": list(SOURCE_FILE_MIB), "version": SOURCE_VERSION}
    if marker.is_file() and not rebuild:
        manifest = json.loads(marker.read_text())
        if manifest.get("params") == params and all(
            (bench_dir / "source" / rel).is_file() for rels in manifest["files"].values() for rel in rels
        ):
            print(f"using cached source data in {bench_dir} ({manifest['file_count']} files, {manifest['bytes'] / GIB:.2f} GiB)")
            return manifest
    marker.unlink(missing_ok=True)
    source = bench_dir / "source"
    if source.exists():
        for path in source.rglob("*"):
            os.chmod(path, 0o755 if path.is_dir() else 0o644)
        shutil.rmtree(source)
    bench_dir.mkdir(parents=True, exist_ok=True)

    con = duckdb.connect()
    con.execute("SET threads = 2")
    bpr = bytes_per_row(con, bench_dir)
    per_partition = gib * GIB * 1.005 / partitions
    lo, hi = (round(m * MIB / bpr) for m in SOURCE_FILE_MIB)
    rng = random.Random(16)
    plan: dict[str, list[int]] = {}
    for date in dates(partitions):
        counts, total = [], 0.0
        while total < per_partition:
            rows = rng.randint(lo, hi)
            counts.append(rows)
            total += rows * bpr
        plan[date] = counts
    file_count = sum(len(c) for c in plan.values())
    print(f"writing source data: {file_count} files of {SOURCE_FILE_MIB[0]}–{SOURCE_FILE_MIB[1]} MiB "
          f"({lo:,}–{hi:,} rows, ~{bpr:.1f} B/row) over {partitions} partitions …", flush=True)
    started = time.perf_counter()
    files: dict[str, list[str]] = {}
    offset = 0
    for k, (date, counts) in enumerate(plan.items()):
        for n, rows in enumerate(counts):
            rel = f"event_date={date}/{n:05d}.parquet"
            write_file(con, source / rel, generated(offset, rows, date))
            files.setdefault(date, []).append(rel)
            offset += rows
        print(f"  {k + 1}/{partitions} partitions, {time.perf_counter() - started:.0f} s", end="\r", flush=True)
    print()
    build_seconds = time.perf_counter() - started
    sizes = [(source / rel).stat().st_size for rels in files.values() for rel in rels]
    manifest: dict[str, Any] = {
        "params": params,
        "bytes_per_row_estimate": round(bpr, 2),
        "build_seconds": round(build_seconds, 1),
        "files": files,
        "file_count": len(sizes),
        "bytes": sum(sizes),
        "sizes": size_spread(sizes, TARGET_FILE_SIZE_MB * MIB, SIZE_TOLERANCE),
        "row_groups_per_file": con.execute(
            f"SELECT median(n) FROM (SELECT count(DISTINCT row_group_id) AS n FROM parquet_metadata({quote(str(source / '*/*.parquet'))}) "
            "GROUP BY file_name)"
        ).fetchone()[0],
    }
    print("checksumming the source with read_parquet …", flush=True)
    manifest["checksums"] = checksum(con, f"read_parquet({quote(str(source / '*/*.parquet'))})")
    con.close()
    for path in source.rglob("*"):  # the pristine copy: nothing may change it
        os.chmod(path, 0o555 if path.is_dir() else 0o444)

    print("checksumming it again through DuckDB's iceberg extension on a table registering the files …", flush=True)
    check = bench_dir / "check"
    shutil.rmtree(check, ignore_errors=True)
    check.mkdir()
    registered = register_table(check, bench_dir, manifest)
    con = iceberg_connection()
    manifest["iceberg_checksums"] = checksum(con, f"iceberg_scan({quote(registered['metadata_location'])})")
    con.close()
    shutil.rmtree(check, ignore_errors=True)
    problems = compare_checksums(manifest["iceberg_checksums"], manifest["checksums"])
    if problems:
        raise SystemExit(f"the registered table does not read as its files: {problems}")
    marker.write_text(json.dumps(manifest, indent=2))
    return manifest


def check_source(manifest: dict[str, Any], gib: float, partitions: int) -> list[str]:
    """Prints the totals; returns failed requirements."""
    sizes = manifest["sizes"]
    print(f"source: {manifest['file_count']} files, {manifest['bytes'] / GIB:.3f} GiB, {manifest['checksums']['rows']:,} rows "
          f"in {len(manifest['files'])} partitions; file sizes {sizes['min_mib']:.1f} / {sizes['median_mib']:.1f} / "
          f"{sizes['max_mib']:.1f} MiB (min / median / max)")
    failed = []
    if manifest["bytes"] < gib * GIB:
        failed.append(f"only {manifest['bytes'] / GIB:.3f} GiB (want ≥ {gib})")
    if len(manifest["files"]) != partitions or any(len(v) < 2 for v in manifest["files"].values()):
        failed.append("not every partition has two or more files")
    if sizes["max_mib"] >= 64:
        failed.append(f"largest file {sizes['max_mib']:.1f} MiB is not small (under 64 MiB)")
    return failed


# --------------------------------------------------------------------------- the Iceberg table


def iceberg_schema() -> Any:
    from pyiceberg.schema import Schema
    from pyiceberg.types import DateType, DoubleType, IntegerType, LongType, NestedField, StringType, TimestampType

    return Schema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(2, "event_date", DateType(), required=False),
        NestedField(3, "user_id", IntegerType(), required=False),
        NestedField(4, "event_time", TimestampType(), required=False),
        NestedField(5, "amount", DoubleType(), required=False),
        NestedField(6, "score", DoubleType(), required=False),
        NestedField(7, "event_type", StringType(), required=False),
        NestedField(8, "payload", StringType(), required=False),
        NestedField(9, "note", StringType(), required=False),
    )


def sql_catalog(workdir: Path) -> Any:
    return benchlib.sql_catalog(CATALOG_NAME, workdir, workdir / "warehouse")


def register_table(workdir: Path, bench_dir: Path, manifest: dict[str, Any]) -> dict[str, Any]:
    """A new table in ``workdir``'s catalog, identity-partitioned on ``event_date``, registering the
    source files where they lie (``add_files``: nothing is copied)."""
    started = time.perf_counter()
    location = workdir / "warehouse" / f"{NAMESPACE}.db" / TABLE_NAME
    source = bench_dir / "source"
    table = register_files(sql_catalog(workdir), NAMESPACE, TABLE_NAME, iceberg_schema(), "event_date", location,
                           [f"file://{source / rel}" for rels in manifest["files"].values() for rel in rels])
    files = iceberg_files(table, "event_date")
    return {
        "register_seconds": round(time.perf_counter() - started, 1),
        "input_bytes": sum(f["size"] for f in files),
        "input_files": len(files),
        "records": sum(f["rows"] for f in files),
        "metadata_location": table.metadata_location,
        "data_dir": str(location / "data"),
    }


# --------------------------------------------------------------------------- children


class Sampler:
    """Every SAMPLE_SECONDS: VmRSS, DuckDB's memory accounting (through a second connection of the
    same database) and how many output files exist, until stopped."""

    def __init__(self, con: Any, count_outputs: Any) -> None:
        self.cursor = con.cursor()
        self.count_outputs = count_outputs
        self.samples: list[tuple[float, float, float, float, int]] = []
        self.stop = threading.Event()
        self.started = time.perf_counter()
        self.thread = threading.Thread(target=self.loop, daemon=True)

    def loop(self) -> None:
        while not self.stop.is_set():
            t = time.perf_counter() - self.started
            rss = proc_status_kib("VmRSS") / 1024
            try:
                used, temp = self.cursor.execute(
                    "SELECT sum(memory_usage_bytes), sum(temporary_storage_bytes) FROM duckdb_memory()"
                ).fetchone()
            except Exception:  # noqa: BLE001 - a sample may fail while the database is busy; skip it
                used, temp = None, None
            self.samples.append((round(t, 2), round(rss, 1), round((used or 0) / MIB, 1), round((temp or 0) / MIB, 1),
                                 self.count_outputs()))
            self.stop.wait(SAMPLE_SECONDS)

    def __enter__(self) -> "Sampler":
        self.started = time.perf_counter()
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop.set()
        self.thread.join()
        self.cursor.close()


def count_files(directory: Path, pattern: str) -> Any:
    return lambda: sum(1 for _ in directory.glob(pattern)) if directory.exists() else 0


def run_method(method: str, workdir: Path, bench_dir: Path, manifest: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """The timed call, in this (fresh) process: connect, SET the limits, (LOAD), compact."""
    import duckdb

    baseline = proc_status_kib("VmRSS")
    started = time.perf_counter()
    if method == "lakehouse":
        setup = json.loads((workdir / "setup.json").read_text())
        con = lakehouse_connection(args.extension, *duckdb_settings(args.memory_limit, args.threads))
        outputs = count_files(Path(setup["data_dir"]), "*/*-compacted.parquet")
    else:
        con = duckdb.connect()
        for statement in duckdb_settings(args.memory_limit, args.threads):
            con.execute(statement)
        out = workdir / "out"
        out.mkdir(parents=True, exist_ok=True)
        outputs = count_files(out, "*/*.parquet")
    result: dict[str, Any] = {"memory_limit_setting": con.execute("SELECT current_setting('memory_limit')").fetchone()[0]}
    ready = {"rss_kib": proc_status_kib("VmRSS"), "hwm_kib": proc_status_kib("VmHWM"),
             "seconds": time.perf_counter() - started}
    cpu_before = cpu_seconds()
    with Sampler(con, outputs) as sampler:
        if method == "lakehouse":
            result["result_rows"] = fetch_dicts(con.execute(
                f"SELECT * FROM lakehouse_compact({quote(f'{NAMESPACE}.{TABLE_NAME}')}, "
                f"catalog_uri := {quote(catalog_uri(workdir))}, target_file_size_mb := {TARGET_FILE_SIZE_MB})"
            ))
        else:
            source = bench_dir / "source"
            for date, rels in manifest["files"].items():
                listing = quote_list([str(source / rel) for rel in rels])
                con.execute(
                    f"COPY (SELECT * FROM read_parquet({listing})) TO {quote(str(out / date))} "
                    f"(FORMAT parquet, COMPRESSION zstd, FILE_SIZE_BYTES '{TARGET_FILE_SIZE_MB}MiB')"
                )
    con.close()
    seconds = time.perf_counter() - started
    cpu = cpu_seconds() - cpu_before
    samples = sampler.samples
    with open(bench_dir / "runs" / f"{method}-{args.attempt}-timeline.csv", "w") as timeline:
        timeline.write("seconds,vmrss_mib,duckdb_memory_mib,duckdb_temp_mib,outputs\n")
        timeline.writelines(",".join(str(v) for v in s) + "\n" for s in samples)
    peak = max(samples, key=lambda s: s[1]) if samples else None
    result.update({
        "seconds": seconds,
        "cpu_seconds": cpu,
        "baseline_rss_kib": baseline,
        "ready": ready,
        "peak_rss_kib": proc_status_kib("VmHWM"),
        "samples": len(samples),
        "sampled_peak_rss_mib": peak[1] if peak else None,
        "sampled_peak_at_seconds": peak[0] if peak else None,
        "outputs_at_peak": peak[4] if peak else None,
        "duckdb_memory_peak_mib": max((s[2] for s in samples), default=None),
        "duckdb_temp_peak_mib": max((s[3] for s in samples), default=None),
        # RSS drift: median VmRSS over the first and the last fifth of the call
        "rss_first_fifth_mib": statistics.median(s[1] for s in samples[: max(1, len(samples) // 5)]) if samples else None,
        "rss_last_fifth_mib": statistics.median(s[1] for s in samples[-max(1, len(samples) // 5):]) if samples else None,
    })
    return result


def validate(method: str, workdir: Path, bench_dir: Path, manifest: dict[str, Any]) -> dict[str, Any]:
    target = TARGET_FILE_SIZE_MB * MIB
    out: dict[str, Any] = {}
    if method == "lakehouse":
        table = sql_catalog(workdir).load_table(f"{NAMESPACE}.{TABLE_NAME}")
        files = iceberg_files(table, "event_date")
        source = str(bench_dir / "source")
        new = [f for f in files if source not in f["path"]]
        out["live_source_files"] = len(files) - len(new)
        out["files_after"] = len(files)
        out["partitions_after"] = len({f["partition"] for f in files})
        sizes = [f["size"] for f in new]
        out["metadata_location"] = table.metadata_location
        out["snapshot_operation"] = snapshot_operation(table)
        con = iceberg_connection()
        out["checksums"] = checksum(con, f"iceberg_scan({quote(table.metadata_location)})")
        con.close()
    else:
        import duckdb

        outputs = sorted((workdir / "out").glob("*/*.parquet"))
        out["files_after"] = len(outputs)
        out["partitions_after"] = len({p.parent.name for p in outputs})
        sizes = [p.stat().st_size for p in outputs]
        con = duckdb.connect()
        out["checksums"] = checksum(con, f"read_parquet({quote_list([str(p) for p in outputs])})")
        con.close()
    out["spread"] = size_spread(sizes, target, SIZE_TOLERANCE)
    out["problems"] = compare_checksums(out["checksums"], manifest["checksums"])
    return out


def child(args: argparse.Namespace) -> int:
    """One phase of one method, in its own process; writes ``<workdir>/<phase>.json``."""
    workdir = Path(args.workdir)
    bench_dir = Path(args.dir).resolve()
    manifest = json.loads((bench_dir / "source.json").read_text())
    if args.child == "setup":
        out = register_table(workdir, bench_dir, manifest) if args.method == "lakehouse" else {
            "register_seconds": 0.0, "input_bytes": manifest["bytes"], "input_files": manifest["file_count"]}
    elif args.child == "run":
        out = run_method(args.method, workdir, bench_dir, manifest, args)
    else:
        out = validate(args.method, workdir, bench_dir, manifest)
    (workdir / f"{args.child}.json").write_text(json.dumps(out, indent=2, default=str))
    return 0


# --------------------------------------------------------------------------- parent


def run_phase(method: str, phase: str, workdir: Path, args: argparse.Namespace, extension: Path, attempt: int = 1) -> dict[str, Any]:
    return benchlib.run_phase(__file__, method, phase, workdir, Path(args.dir).resolve(), extension,
                              ["--attempt", str(attempt), "--memory-limit", args.memory_limit, "--threads", str(args.threads)])


def progress(phase: str, out: dict[str, Any], setup: dict[str, Any]) -> str:
    """What the parent prints after a phase."""
    if phase == "setup":
        return f"    registered in {out['register_seconds']} s; compacting …"
    if phase == "run":
        return (f"    {out['seconds']:.1f} s, {setup['input_bytes'] / MIB / out['seconds']:.1f} MiB/s, peak RSS "
                f"{out['peak_rss_kib'] / 1024:,.0f} MiB (ready {out['ready']['hwm_kib'] / 1024:,.0f} MiB, DuckDB-accounted "
                f"peak {out['duckdb_memory_peak_mib']} MiB, spilled {out['duckdb_temp_peak_mib']} MiB); validating …")
    sp = out["spread"]
    status = "ok" if not out["problems"] else "MISMATCH: " + "; ".join(out["problems"])
    return (f"    {out['checksums']['rows']:,} rows; {sp['count']} output files, {sp['on_target_share']:.0%} within "
            f"±25 %, {sp['min_mib']:.1f} / {sp['median_mib']:.1f} / {sp['max_mib']:.1f} MiB: {status}")


def yes(ok: bool) -> str:
    return "yes" if ok else "**no**"


def report(results: dict[str, list[dict[str, Any]]], manifest: dict[str, Any], facts: dict[str, Any]) -> str:
    best = {m: min(runs, key=lambda r: r["run"]["seconds"]) for m, runs in results.items()}
    limit_mib = facts["limit_bytes"] / MIB
    target = TARGET_FILE_SIZE_MB
    sizes = manifest["sizes"]
    lines = [
        "# Compaction under a memory limit",
        "",
        "Goal (issue 16): compaction of 10 GiB in 40 degraded partitions with `SET memory_limit = '1GB'`: peak RSS "
        "stays under the limit plus a fixed margin; throughput within 15 % of the floor; output files within ±25 % "
        "of the target for ≥ 90 % of them.",
        "",
        f"Reproduce: `{facts['command']}` ({facts['when']}; {facts['machine']}; duckdb {facts['duckdb']}, pyiceberg "
        f"{facts['pyiceberg']}; extension `{facts['extension']}`; the run took {facts['total_minutes']:.1f} min "
        "including setup and validation; the 2 cores were shared with other work, so timings are indicative).",
        "",
        f"Data: {manifest['file_count']:,} Parquet files, {manifest['bytes'] / MIB:,.0f} MiB ({manifest['bytes'] / GIB:.2f} GiB), "
        f"{manifest['checksums']['rows']:,} rows in {len(manifest['files'])} identity partitions (`event_date`), "
        f"{sizes['min_mib']:.1f} / {sizes['median_mib']:.1f} / {sizes['max_mib']:.1f} MiB per file (min / median / max), "
        f"{manifest['row_groups_per_file']:g} row groups per file (median), zstd, written by DuckDB with Iceberg field ids; "
        "every partition degraded (all files under the 64 MiB small-file threshold). An Iceberg table (pyiceberg "
        "`SqlCatalog`, files registered with `add_files`) for lakehouse; the same files for the floor.",
        "",
        f"Each method in a fresh process with `SET memory_limit = '{facts['memory_limit']}'` (DuckDB: "
        f"{limit_mib:,.1f} MiB) and `SET threads = {facts['threads']}`; {facts['repeat']} run(s) each, fastest shown "
        "(CPU s: user + system seconds of the process during the call). "
        "Peak RSS = the process's VmHWM (Python, DuckDB and the extension included); *ready* = its RSS after "
        "connect, SET and LOAD, before the call: the fixed margin allowed over the limit.",
        "",
        "| method | seconds | CPU s | MiB/s | peak RSS MiB | ready RSS MiB | limit + ready MiB | over limit + ready MiB | "
        "DuckDB-accounted peak MiB | spilled MiB | output files | within ±25 % of 128 MiB | min / median / max MiB |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for method, r in best.items():
        run, val = r["run"], r["validate"]
        mib = r["setup"]["input_bytes"] / MIB
        peak = max(x["run"]["peak_rss_kib"] for x in results[method]) / 1024
        ready = run["ready"]["hwm_kib"] / 1024
        sp = val["spread"]
        lines.append(
            f"| {LABELS[method]} | {run['seconds']:.1f} | {run['cpu_seconds']:.1f} | {mib / run['seconds']:.1f} | {peak:,.0f} | {ready:,.0f} | "
            f"{limit_mib + ready:,.0f} | {max(0.0, peak - limit_mib - ready):,.0f} | {run['duckdb_memory_peak_mib'] or 0:,.0f} | "
            f"{run['duckdb_temp_peak_mib'] or 0:,.0f} | {sp['count']} | {sp['on_target']} ({sp['on_target_share']:.0%}) | "
            f"{sp['min_mib']:.1f} / {sp['median_mib']:.1f} / {sp['max_mib']:.1f} |"
        )
    if facts["repeat"] > 1:
        lines += ["", "All runs in order (wall s / CPU s / peak RSS MiB): " + "; ".join(
            f"{LABELS[m]} " + ", ".join(f"{x['run']['seconds']:.1f} / {x['run']['cpu_seconds']:.1f} / {x['run']['peak_rss_kib'] / 1024:,.0f}"
                                        for x in runs)
            for m, runs in results.items())]

    lines += ["", "## Goals (lakehouse_compact)", "", "| goal | measured | met |", "|---|---:|:---:|"]
    if "lakehouse" in best:
        ours = best["lakehouse"]
        peak = max(x["run"]["peak_rss_kib"] for x in results["lakehouse"]) / 1024
        ready = ours["run"]["ready"]["hwm_kib"] / 1024
        lines.append(f"| peak RSS ≤ limit ({limit_mib:,.0f} MiB) + ready RSS ({ready:,.0f} MiB) = {limit_mib + ready:,.0f} MiB | "
                     f"{peak:,.0f} MiB | {yes(peak <= limit_mib + ready)} |")
        if "floor" in best:
            floor = best["floor"]["run"]["seconds"]
            overhead = (ours["run"]["seconds"] - floor) / floor
            lines.append(f"| throughput within {FLOOR_OVERHEAD_GOAL:.0%} of the floor (fastest wall time over the floor's) | "
                         f"{overhead:+.1%} | {yes(overhead <= FLOOR_OVERHEAD_GOAL)} |")
            med = statistics.median(x["run"]["seconds"] for x in results["lakehouse"]) / statistics.median(
                x["run"]["seconds"] for x in results["floor"]) - 1
            lines.append(f"| (the same on the median wall time of each method's runs) | {med:+.1%} | {yes(med <= FLOOR_OVERHEAD_GOAL)} |")
            cpu = min(x["run"]["cpu_seconds"] for x in results["lakehouse"]) / min(x["run"]["cpu_seconds"] for x in results["floor"]) - 1
            lines.append(f"| (the same on CPU seconds, less sensitive to other work on the machine) | {cpu:+.1%} | "
                         f"{yes(cpu <= FLOOR_OVERHEAD_GOAL)} |")
        sp = ours["validate"]["spread"]
        lines.append(f"| ≥ {ON_TARGET_SHARE_GOAL:.0%} of output files within ±{SIZE_TOLERANCE:.0%} of {target} MiB "
                     f"({target * (1 - SIZE_TOLERANCE):.0f}–{target * (1 + SIZE_TOLERANCE):.0f} MiB) | "
                     f"{sp['on_target_share']:.0%} ({sp['on_target']} of {sp['count']}) | {yes(sp['on_target_share'] >= ON_TARGET_SHARE_GOAL)} |")
        checks = ours["validate"]
        lines.append(f"| rows and checksums equal before and after (DuckDB `iceberg_scan`) | "
                     f"{checks['checksums']['rows']:,} rows | {yes(not checks['problems'])} |")

    lines += ["", "## Validation and memory over time", "",
              "| method | rows (source " f"{manifest['checksums']['rows']:,}" ") | rows & checksums equal | files before → after | "
              "partitions after | peak RSS sampled at | outputs existing then | median RSS first → last fifth MiB |",
              "|---|---:|:---:|---|---:|---:|---:|---:|"]
    for method, runs in results.items():
        r = runs[-1]
        val, run = r["validate"], r["run"]
        ok = "yes" if not val["problems"] else "**no**: " + "; ".join(val["problems"])
        lines.append(
            f"| {LABELS[method]} | {val['checksums']['rows']:,} | {ok} | {r['setup']['input_files']} → {val['files_after']} | "
            f"{val['partitions_after']} | {run['sampled_peak_at_seconds']} s of {run['seconds']:.0f} s | {run['outputs_at_peak']} | "
            + (f"{run['rss_first_fifth_mib']:,.0f} → {run['rss_last_fifth_mib']:,.0f} |" if run.get("rss_last_fifth_mib") else "– |")
        )
    if "lakehouse" in results:
        r = results["lakehouse"][-1]
        rows = r["run"].get("result_rows", [])
        verdicts: dict[str, int] = {}
        for row in rows:
            verdicts[row["verdict"]] = verdicts.get(row["verdict"], 0) + 1
        outputs = [row["output_files"] for row in rows if row["verdict"] == "compacted"]
        lines += ["", f"`lakehouse_compact` returned {len(rows)} partitions: "
                  + ", ".join(f"{n} {v}" for v, n in sorted(verdicts.items()))
                  + (f"; output files per compacted partition {min(outputs)}–{max(outputs)}" if outputs else "")
                  + f"; snapshot operation `{r['validate'].get('snapshot_operation')}`, "
                  f"{r['validate'].get('live_source_files')} source files still live."]
    lines += ["", "## Methods", ""] + [f"- **{LABELS[m]}**: {WHAT[m]}" for m in results]
    lines += ["", "Timelines of VmRSS, DuckDB's accounting and outputs written: `<dir>/runs/<method>-<run>-timeline.csv`.", ""]
    if "lakehouse" in results and "floor" in results:
        floor_cpu = min(x["run"]["cpu_seconds"] for x in results["floor"])
        spun = [x["run"] for x in results["lakehouse"] if x["run"]["cpu_seconds"] > SPIN_CPU_RATIO * floor_cpu]
        if spun:
            cpus = ", ".join(f"{r['cpu_seconds']:.0f} s" for r in spun)
            lines += ["## Runs with twice the CPU", "", f"{len(spun)} of {len(results['lakehouse'])} lakehouse run(s) used more "
                      f"than {SPIN_CPU_RATIO:g}× the floor's CPU seconds ({cpus} vs "
                      f"{floor_cpu:.0f} s) for the same work. In such runs (seen with `perf`) the host's client thread (Python's "
                      "`execute`) busy-polls the outer query — `pthread_mutex_lock`/`unlock`, `ClientContext::ExecuteTaskInternal`, "
                      "`take_gil` — while DuckDB's one worker thread runs `lakehouse_compact` and, inside it, every nested COPY "
                      "alone: which thread gets the function's init (the work) is a race between DuckDB's pipeline tasks. The "
                      "rewrite then runs on one thread and a core is burnt waiting.", ""]
    if facts.get("notes"):
        lines += ["## Notes", "", facts["notes"], ""]
    return "\n".join(lines)


LABELS = {"floor": "floor: bare DuckDB COPY", "lakehouse": "lakehouse_compact"}
WHAT = {
    "floor": "per partition `COPY (SELECT * FROM read_parquet([<its files>])) TO '<out>/<partition>' (FORMAT parquet, "
             f"COMPRESSION zstd, FILE_SIZE_BYTES '{TARGET_FILE_SIZE_MB}MiB')` on one fresh connection; no metadata.",
    "lakehouse": f"`lakehouse_compact('ns.t', catalog_uri := …, target_file_size_mb := {TARGET_FILE_SIZE_MB})` (other options "
                 "default) on the pyiceberg `SqlCatalog` table; one `replace` snapshot.",
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default=DEFAULT_DIR, help=f"cache and work directory (default {DEFAULT_DIR})")
    parser.add_argument("--gib", type=float, default=10.0, help="source size in GiB (default 10)")
    parser.add_argument("--partitions", type=int, default=40, help="identity partitions (default 40)")
    parser.add_argument("--memory-limit", default="1GB", help="DuckDB memory_limit of each timed process (default 1GB)")
    parser.add_argument("--threads", type=int, default=2, help="DuckDB threads of each timed process (default 2)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per method (the fastest is reported)")
    parser.add_argument("--methods", default=",".join(METHODS), help=f"comma-separated subset of {','.join(METHODS)}")
    parser.add_argument("--rebuild", action="store_true", help="rewrite the cached source data")
    parser.add_argument("--keep", action="store_true", help="keep each method's work directory (its output) after the run")
    parser.add_argument("--extension", help="lakehouse extension file")
    parser.add_argument("--output", default=str(DEFAULT_OUTPUT), help="markdown report path")
    parser.add_argument("--notes", help="a paragraph appended to the report")
    parser.add_argument("--child", choices=["setup", "run", "validate"], help=argparse.SUPPRESS)
    parser.add_argument("--method", help=argparse.SUPPRESS)
    parser.add_argument("--workdir", help=argparse.SUPPRESS)
    parser.add_argument("--attempt", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args)

    began = time.perf_counter()
    extension = extension_path(args.extension)
    methods = selected_methods(args.methods, METHODS, extension)
    bench_dir = Path(args.dir).resolve()
    manifest = build_source(bench_dir, args.gib, args.partitions, args.rebuild)
    if failed := check_source(manifest, args.gib, args.partitions):
        raise SystemExit("source data does not meet the requirements: " + "; ".join(failed))

    results = run_methods(methods, args.repeat, bench_dir, args.keep,
                          lambda method, phase, workdir, attempt: run_phase(method, phase, workdir, args, extension, attempt),
                          progress)

    import duckdb
    import pyiceberg

    command = ["LAKEHOUSE_EXTENSION=" + os.path.relpath(extension, REPO_ROOT), ".venv/bin/python", "bench/bench_compact_memory.py"]
    if args.dir != DEFAULT_DIR:
        command += ["--dir", args.dir]
    for flag, value, default in (("--gib", args.gib, 10.0), ("--partitions", args.partitions, 40),
                                 ("--memory-limit", args.memory_limit, "1GB"), ("--threads", args.threads, 2),
                                 ("--repeat", args.repeat, 1), ("--methods", args.methods, ",".join(METHODS))):
        if value != default:
            command += [flag, f"{value:g}" if isinstance(value, float) else str(value)]
    facts = {
        "command": " ".join(command),
        "repeat": args.repeat,
        "memory_limit": args.memory_limit,
        "limit_bytes": limit_bytes(args.memory_limit),
        "threads": args.threads,
        "when": dt.date.today().isoformat(),
        "machine": machine(ram=True),
        "extension": os.path.relpath(extension, REPO_ROOT),
        "duckdb": duckdb.__version__,
        "pyiceberg": pyiceberg.__version__,
        "total_minutes": (time.perf_counter() - began) / 60,
        "notes": args.notes,
    }
    write_report(report(results, manifest, facts), args.output, bench_dir / "results.json", {"facts": facts, "results": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
