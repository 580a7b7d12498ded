#!/usr/bin/env python3
"""Benchmark: expiring the snapshots of a long Iceberg history, lakehouse vs pyiceberg.

Usage::

    .venv/bin/python bench/bench_expire.py [--dir /tmp/lakehouse-bench] [--rebuild] [--repeat 5]
    .venv/bin/python bench/bench_expire.py --history merged [--snapshots 20000] [--callgrind]

Two histories, each built once and cached under ``--dir`` with a pristine copy:

- ``--history demo`` (the default; 2,000 snapshots): written by ``lakehouse_demo(…, scale :=
  0.0001, snapshots := 2000, history_days := 14)`` — fast appends, so every manifest list
  carries every earlier manifest (2,000 lists of up to 2,000 entries). Retention: 7 days before
  now. Results: ``bench/results/expire.md``.
- ``--history merged`` (default 20,000 snapshots): a metadata-only history written directly with
  pyiceberg's manifest and manifest-list writers (no data file exists; expiry never reads data
  files, and an append-only history frees none). Each snapshot appends one data file in a
  manifest of its own; manifests are merged as Java's ``MergeAppend`` does with
  ``commit.manifest.min-count-to-merge = 100``: when a snapshot's list would reach 100
  manifests, they are all rewritten into one (earlier files as EXISTING entries, the new one
  ADDED), so every list holds the merged manifest plus at most 99 newer small ones. Snapshots
  are spread over ``--history-days`` (14) ending at build time, partitioned by day. Manifests go
  out in Avro blocks of 100 entries (Java's writer makes ~64 KB blocks; pyiceberg's own writer
  one block per entry). The cutoff is fixed at build time: halfway between the two snapshots
  around (newest − 7 days); each run passes the retention that reaches it (about 7 days on the
  day of the build), so the selection does not drift with the age of the cache or between
  methods. Results: ``bench/results/expire_20k.md`` (``expire_<n>.md`` for other sizes).

Before each method the table is restored from the pristine copy at the same path (metadata holds
absolute paths; the merged history is restored as hard links, since neither method rewrites a
file in place) and registered in a fresh sqlite ``SqlCatalog``; each method then runs in a
process of its own (peak RSS is that process's, the Python interpreter and its imports
included), methods alternating, ``--repeat`` times each:

1. lakehouse: ``SELECT * FROM lakehouse_expire_snapshots('bench.expire', snapshot_retention_days := …)``
   — commits and deletes the files only expired snapshots reached (manifest lists, manifests
   merged away, and for the demo history the metadata files that fall out of the log);
2. lakehouse, dry run (the same selection and reachability, nothing committed or deleted);
3. pyiceberg: ``load_table`` + ``maintenance.expire_snapshots().older_than(cutoff).commit()``
   — metadata only: pyiceberg deletes no files.

Times: "call" is the expiry itself (lakehouse: the query, which locates the table in the catalog;
pyiceberg: ``load_table`` + expire + commit); "total" adds the setup in the same process
(lakehouse: ``duckdb.connect`` + ``LOAD``; pyiceberg: the ``SqlCatalog``). Module imports are
done before either. Both methods must leave the same snapshots.

``--callgrind`` then runs lakehouse, the dry run and a baseline (connect + ``LOAD`` + ``SELECT 1``)
once each under ``valgrind --tool=callgrind`` (``--callgrind-pyiceberg`` adds pyiceberg and its
baseline, the catalog alone: slow) and reports instruction counts (Ir, all threads) and Ir over
the baseline, plus the top functions by self cost of the lakehouse run (callgrind_annotate).
``--repeat 0`` skips the timed runs.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_profile import extension_path  # noqa: E402

DEFAULT_DIR = "/tmp/lakehouse-bench"
RESULTS = REPO_ROOT / "bench" / "results"
NAMESPACE, TABLE_NAME = "bench", "expire"
RETENTION_DAYS = 7
DAY_MS = 86_400_000
METHODS = ["lakehouse", "lakehouse_dry_run", "pyiceberg"]
VALGRIND = "/usr/bin/valgrind"


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


# --- the demo history -------------------------------------------------------------------------


def build_demo(bench_dir: Path, snapshots: int, extension: str, rebuild: bool) -> dict:
    """The pristine lakehouse_demo table (cached) and its facts."""
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
    facts.update(pristine=str(pristine), table=str(bench_dir / f"expire-{snapshots}"), link=False)
    return facts


# --- the merged history -----------------------------------------------------------------------

BLOCK_ENTRIES = 100


def _block_manifest_writer():
    from pyiceberg.avro.file import AvroOutputFile
    from pyiceberg.manifest import ManifestWriterV2

    class BlockManifestWriter(ManifestWriterV2):
        """pyiceberg's ManifestWriterV2 (same schema, metadata, counts and partition summaries),
        writing its entries in Avro blocks of BLOCK_ENTRIES instead of one block per entry."""

        def __enter__(self):
            super().__enter__()
            self._pending = []
            self._writer.write_block = self._pending.extend  # add_entry hands over one entry at a time
            return self

        def __exit__(self, *exc):
            for i in range(0, len(self._pending), BLOCK_ENTRIES):
                AvroOutputFile.write_block(self._writer, self._pending[i:i + BLOCK_ENTRIES])
            return super().__exit__(*exc)

    return BlockManifestWriter


def write_merged_history(table: Path, snapshots: int, history_days: float, merge_at: int, seed: int = 16) -> dict:
    """Writes the merged history's metadata at `table` (see the module docstring); its facts."""
    import copy
    import random
    import struct
    import uuid

    from pyiceberg.io.pyarrow import PyArrowFileIO
    from pyiceberg.manifest import (DataFile, DataFileContent, FileFormat, ManifestEntry, ManifestEntryStatus,
                                    ManifestListWriterV2)
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import DayTransform
    from pyiceberg.typedef import Record
    from pyiceberg.types import DoubleType, LongType, NestedField, StringType, TimestamptzType

    writer_class = _block_manifest_writer()
    rng = random.Random(seed)
    new_uuid = lambda: uuid.UUID(int=rng.getrandbits(128), version=4)  # noqa: E731
    io = PyArrowFileIO()
    location = str(table)
    (table / "metadata").mkdir(parents=True)
    schema = Schema(NestedField(1, "id", LongType(), required=True),
                    NestedField(2, "ts", TimestamptzType(), required=True),
                    NestedField(3, "category", StringType(), required=False),
                    NestedField(4, "value", DoubleType(), required=False))
    spec = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=DayTransform(), name="ts_day"), spec_id=0)
    end_ms = int(time.time() * 1000) - 60_000
    start_ms = end_ms - int(history_days * DAY_MS)
    step = (end_ms - start_ms) / max(1, snapshots - 1)
    categories = [f"c{i:02d}" for i in range(40)]
    live: dict[str, list] = {}  # manifest path → its entries as (snapshot id, sequence number, data file)
    current: list = []  # the newest snapshot's manifests, newest first
    snaps, snapshot_log, ids = [], [], set()
    parent = None
    total_records = total_size = next_row = merges = 0
    for i in range(snapshots):
        seq = i + 1
        ts_ms = int(start_ms + i * step)
        while (sid := rng.getrandbits(62) + 1) in ids:
            pass
        ids.add(sid)
        day = ts_ms // DAY_MS
        rows = rng.randint(2_000, 20_000)
        size = rows * 24 + rng.randint(2_000, 6_000)
        ts_us = ts_ms * 1000
        low, next_row = next_row, next_row + rows
        cats = sorted(rng.sample(categories, 2))
        data = DataFile.from_args(
            content=DataFileContent.DATA,
            file_path=f"{location}/data/ts_day={dt.date.fromordinal(719163 + day).isoformat()}/"
                      f"00000-{i}-{new_uuid()}-00001.parquet",
            file_format=FileFormat.PARQUET, partition=Record(day), record_count=rows, file_size_in_bytes=size,
            column_sizes={1: rows * 8, 2: rows * 8, 3: rows * 2, 4: rows * 8},
            value_counts={1: rows, 2: rows, 3: rows, 4: rows}, null_value_counts={1: 0, 2: 0, 3: 0, 4: rows // 100},
            nan_value_counts={4: 0},
            lower_bounds={1: struct.pack("<q", low), 2: struct.pack("<q", ts_us - 60_000_000),
                          3: cats[0].encode(), 4: struct.pack("<d", 0.0)},
            upper_bounds={1: struct.pack("<q", next_row - 1), 2: struct.pack("<q", ts_us),
                          3: cats[1].encode(), 4: struct.pack("<d", 1000.0)},
            split_offsets=[4], sort_order_id=0)
        total_records += rows
        total_size += size
        merge = len(current) + 1 >= merge_at
        merges += merge
        manifest_path = f"{location}/metadata/{new_uuid()}-m0.avro"
        with writer_class(spec, schema, io.new_output(manifest_path), sid, "deflate") as writer:
            writer.add_entry(ManifestEntry.from_args(status=ManifestEntryStatus.ADDED, snapshot_id=sid,
                                                     sequence_number=None, file_sequence_number=None, data_file=data))
            mine = [(sid, seq, data)]
            if merge:
                for manifest in current:
                    for entry in live.pop(manifest.manifest_path):
                        writer.add_entry(ManifestEntry.from_args(
                            status=ManifestEntryStatus.EXISTING, snapshot_id=entry[0], sequence_number=entry[1],
                            file_sequence_number=entry[1], data_file=entry[2]))
                        mine.append(entry)
        live[manifest_path] = mine
        current = [writer.to_manifest_file()] + ([] if merge else current)
        list_path = f"{location}/metadata/snap-{sid}-1-{new_uuid()}.avro"
        with ManifestListWriterV2(io.new_output(list_path), sid, parent, seq, "deflate") as list_writer:
            list_writer.add_manifests(current)
        for k, manifest in enumerate(current):  # what the list writer assigned, for the next lists
            if manifest.sequence_number == -1 or manifest.min_sequence_number == -1:
                manifest = copy.copy(manifest)
                manifest.sequence_number = seq if manifest.sequence_number == -1 else manifest.sequence_number
                manifest.min_sequence_number = seq if manifest.min_sequence_number == -1 else manifest.min_sequence_number
                current[k] = manifest
        snapshot = {
            "snapshot-id": sid, "sequence-number": seq, "timestamp-ms": ts_ms, "manifest-list": list_path,
            "summary": {"operation": "append", "added-data-files": "1", "added-records": str(rows),
                        "added-files-size": str(size), "changed-partition-count": "1",
                        "total-records": str(total_records), "total-files-size": str(total_size),
                        "total-data-files": str(i + 1), "total-delete-files": "0", "total-position-deletes": "0",
                        "total-equality-deletes": "0"},
            "schema-id": 0,
        }
        if parent is not None:
            snapshot["parent-snapshot-id"] = parent
        snaps.append(snapshot)
        snapshot_log.append({"timestamp-ms": ts_ms, "snapshot-id": sid})
        parent = sid
        if (i + 1) % 2000 == 0:
            print(f"  {i + 1} snapshots written", file=sys.stderr)
    metadata = {
        "format-version": 2, "table-uuid": str(new_uuid()), "location": location,
        "last-sequence-number": snapshots, "last-updated-ms": snaps[-1]["timestamp-ms"], "last-column-id": 4,
        "current-schema-id": 0, "schemas": [json.loads(schema.model_dump_json(by_alias=True)) | {"schema-id": 0}],
        "default-spec-id": 0, "partition-specs": [json.loads(spec.model_dump_json(by_alias=True))],
        "last-partition-id": 1000, "default-sort-order-id": 0, "sort-orders": [{"order-id": 0, "fields": []}],
        "properties": {"write.parquet.compression-codec": "zstd",
                       "commit.manifest.min-count-to-merge": str(merge_at)},
        "current-snapshot-id": parent, "refs": {"main": {"snapshot-id": parent, "type": "branch"}},
        "snapshots": snaps, "snapshot-log": snapshot_log, "metadata-log": [], "statistics": [],
        "partition-statistics": [],
    }
    name = f"{snapshots:05d}-{new_uuid()}.metadata.json"
    (table / "metadata" / name).write_text(json.dumps(metadata))
    # The fixed cutoff: halfway between the snapshots around (newest − retention).
    stamps = [s["timestamp-ms"] for s in snaps]
    target = stamps[-1] - RETENTION_DAYS * DAY_MS
    k = next((j for j, t in enumerate(stamps) if t >= target), len(stamps) - 1)
    cutoff_ms = (stamps[k - 1] + stamps[k]) // 2 if k > 0 else stamps[0] - 1
    return {"metadata_file": name, "cutoff_ms": cutoff_ms, "expected_expired": sum(t < cutoff_ms for t in stamps),
            "merges": merges, "manifests_in_current_list": len(current)}


def build_merged(bench_dir: Path, snapshots: int, history_days: float, merge_at: int, rebuild: bool) -> dict:
    """The pristine merged-history table (cached) and its facts."""
    stem = f"expire-merged-{snapshots}"
    pristine, facts_path, table = bench_dir / f"{stem}-pristine", bench_dir / f"{stem}.json", bench_dir / stem
    params = {"snapshots": snapshots, "history_days": history_days, "merge_at": merge_at,
              "block_entries": BLOCK_ENTRIES}
    cached = json.loads(facts_path.read_text()) if facts_path.is_file() else {}
    if rebuild or cached.get("params") != params or not pristine.is_dir():
        shutil.rmtree(pristine, ignore_errors=True)
        shutil.rmtree(table, ignore_errors=True)
        print(f"writing the merged history ({snapshots} snapshots) …", file=sys.stderr)
        started = time.perf_counter()
        facts = write_merged_history(table, snapshots, history_days, merge_at)
        facts.update(params=params, build_s=round(time.perf_counter() - started, 1), built=dt.date.today().isoformat())
        verify_merged(table, facts)
        table.rename(pristine)
        facts_path.write_text(json.dumps(facts))
    facts = json.loads(facts_path.read_text())
    facts.update(pristine=str(pristine), table=str(table), link=True)
    return facts


def verify_merged(table: Path, facts: dict) -> None:
    """pyiceberg reads the history back: the newest snapshot and one in the middle plan every file
    they should (each reads its list and manifests)."""
    workdir = table.parent / "expire-verify"
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    cat = catalog(workdir)
    cat.create_namespace(NAMESPACE)
    loaded = cat.register_table(f"{NAMESPACE}.{TABLE_NAME}", str(table / "metadata" / facts["metadata_file"]))
    snaps = loaded.metadata.snapshots
    for k in (len(snaps) - 1, len(snaps) // 2):
        planned = len(list(loaded.scan(snapshot_id=snaps[k].snapshot_id).plan_files()))
        if planned != k + 1:
            raise SystemExit(f"merged history is wrong: snapshot #{k} plans {planned} files, not {k + 1}")
    shutil.rmtree(workdir)


# --- runs -------------------------------------------------------------------------------------


def metadata_stats(facts: dict) -> tuple[int, int]:
    files = list((Path(facts["pristine"]) / "metadata").iterdir())
    return len(files), sum(p.stat().st_size for p in files)


def restore(facts: dict, workdir: Path) -> None:
    """The table at its own path as built, registered in a fresh catalog under `workdir`."""
    table = Path(facts["table"])
    shutil.rmtree(table, ignore_errors=True)
    shutil.copytree(facts["pristine"], table, copy_function=os.link if facts["link"] else shutil.copy2)
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    cat = catalog(workdir)
    cat.create_namespace(NAMESPACE)
    cat.register_table(f"{NAMESPACE}.{TABLE_NAME}", str(table / "metadata" / facts["metadata_file"]))
    os.sync()


def retention_days(cutoff_ms: int | None) -> float:
    """The retention that puts the cutoff at `cutoff_ms` now (7 days when there is none)."""
    if cutoff_ms is None:
        return float(RETENTION_DAYS)
    return (time.time() * 1000 - cutoff_ms) / DAY_MS


def child(method: str, workdir: Path, extension: str, cutoff_ms: int | None) -> dict:
    """Runs one method; the result as a dict (printed as a JSON line)."""
    uri = f"sqlite:///{workdir}/catalog.db"
    started = time.perf_counter()
    counts: dict = {}
    if method.startswith("lakehouse") or method == "baseline":
        con = connect(extension)
        setup = time.perf_counter()
        if method == "baseline":
            con.execute("SELECT 1").fetchall()
        else:
            dry = "true" if method == "lakehouse_dry_run" else "false"
            rows = con.execute(
                f"SELECT kind, count(*) FROM lakehouse_expire_snapshots('{NAMESPACE}.{TABLE_NAME}', "
                f"catalog_uri := '{uri}', snapshot_retention_days := {retention_days(cutoff_ms)!r}, "
                f"dry_run := {dry}) GROUP BY kind").fetchall()
            counts = dict(rows)
    else:
        cat = catalog(workdir)
        setup = time.perf_counter()
        if method == "pyiceberg":
            table = cat.load_table(f"{NAMESPACE}.{TABLE_NAME}")
            if cutoff_ms is None:
                cutoff = dt.datetime.now() - dt.timedelta(days=RETENTION_DAYS)
            else:
                cutoff = dt.datetime.fromtimestamp(cutoff_ms / 1000, tz=dt.timezone.utc)
            before = len(table.metadata.snapshots)
            table.maintenance.expire_snapshots().older_than(cutoff).commit()
            counts = {"snapshot": before - len(table.metadata.snapshots)}  # the committed metadata, not re-read
    done = time.perf_counter()
    return {"method": method, "seconds": done - started, "setup_s": setup - started, "call_s": done - setup,
            "counts": counts, "peak_rss_mib": peak_rss_mib()}


def child_command(method: str, workdir: Path, extension: str, cutoff_ms: int | None) -> list[str]:
    command = [sys.executable, __file__, "--child", method, "--workdir", str(workdir), "--extension", extension]
    return command + (["--cutoff-ms", str(cutoff_ms)] if cutoff_ms is not None else [])


def remaining_snapshots(workdir: Path) -> list[int]:
    table = catalog(workdir).load_table(f"{NAMESPACE}.{TABLE_NAME}")
    return sorted(s.snapshot_id for s in table.metadata.snapshots)


def callgrind_total(path: Path) -> int:
    """The total Ir of a callgrind output file."""
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith(("summary:", "totals:")):
            return int(line.split()[1])
    raise SystemExit(f"no totals in {path}")


def run_callgrind(facts: dict, bench_dir: Path, extension: str, with_pyiceberg: bool) -> tuple[dict, str]:
    """Each run once under callgrind: Ir totals, and callgrind_annotate's top functions (self
    cost) of the lakehouse run."""
    runs = ["baseline", "lakehouse", "lakehouse_dry_run"] + (["pyiceberg_baseline", "pyiceberg"] if with_pyiceberg else [])
    out_dir = bench_dir / "callgrind"
    out_dir.mkdir(parents=True, exist_ok=True)
    totals = {}
    for run in runs:
        workdir = bench_dir / f"expire-work-callgrind-{run}"
        restore(facts, workdir)
        out = out_dir / f"callgrind.{run}.out"
        started = time.perf_counter()
        proc = subprocess.run([VALGRIND, "--tool=callgrind", f"--callgrind-out-file={out}",
                               *child_command(run, workdir, extension, facts.get("cutoff_ms"))],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            print(proc.stdout, proc.stderr[-4000:], file=sys.stderr)
            raise SystemExit(f"{run} under callgrind failed")
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        totals[run] = {"ir": callgrind_total(out), "counts": result["counts"], "wall_s": time.perf_counter() - started}
        print(f"callgrind {run}: {totals[run]['ir']:,} Ir, {totals[run]['wall_s']:.0f} s", file=sys.stderr)
        shutil.rmtree(workdir, ignore_errors=True)
    annotate = subprocess.run(["callgrind_annotate", "--threshold=99", str(out_dir / "callgrind.lakehouse.out")],
                              capture_output=True, text=True).stdout
    top = [line for line in annotate.splitlines() if re.match(r"^\s*[\d,]+ \(\s*[\d.]+%\)\s+\S", line)][:25]
    return totals, "\n".join(top)


def median_result(rs: list[dict], key: str) -> dict:
    median = statistics.median(r[key] for r in rs)
    return {**min(rs, key=lambda r: abs(r[key] - median)), key: median}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dir", default=DEFAULT_DIR)
    parser.add_argument("--history", choices=["demo", "merged"], default="demo")
    parser.add_argument("--snapshots", type=int, help="default: 2000 (demo), 20000 (merged)")
    parser.add_argument("--history-days", type=float, default=14, help="merged history: days the snapshots span")
    parser.add_argument("--merge-at", type=int, default=100, help="merged history: commit.manifest.min-count-to-merge")
    parser.add_argument("--rebuild", action="store_true")
    parser.add_argument("--repeat", type=int, default=5, help="runs per method (alternating); the median counts")
    parser.add_argument("--callgrind", action="store_true", help="also run lakehouse once under valgrind's callgrind")
    parser.add_argument("--callgrind-pyiceberg", action="store_true", help="with --callgrind: pyiceberg too (slow)")
    parser.add_argument("--extension")
    parser.add_argument("--output", help="default: bench/results/expire.md (demo), expire_20k.md (merged)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--workdir", help=argparse.SUPPRESS)
    parser.add_argument("--cutoff-ms", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    extension = str(extension_path(args.extension))
    if args.child:
        print(json.dumps(child(args.child, Path(args.workdir), extension, args.cutoff_ms)))
        return 0

    snapshots = args.snapshots or (2000 if args.history == "demo" else 20000)
    if args.output:
        output = Path(args.output)
    elif args.history == "demo":
        output = RESULTS / "expire.md"
    else:
        output = RESULTS / (f"expire_{snapshots // 1000}k.md" if snapshots % 1000 == 0 else f"expire_{snapshots}.md")
    bench_dir = Path(args.dir)
    bench_dir.mkdir(parents=True, exist_ok=True)
    if args.history == "demo":
        facts = build_demo(bench_dir, snapshots, extension, args.rebuild)
    else:
        facts = build_merged(bench_dir, snapshots, args.history_days, args.merge_at, args.rebuild)
    metadata_files, metadata_bytes = metadata_stats(facts)
    cutoff_ms = facts.get("cutoff_ms")

    runs: dict[str, list[dict]] = {m: [] for m in METHODS}
    remaining: dict[str, list[int]] = {}
    for _ in range(max(0, args.repeat)):
        for method in METHODS:
            workdir = bench_dir / f"expire-work-{method}"
            restore(facts, workdir)
            proc = subprocess.run(child_command(method, workdir, extension, cutoff_ms), capture_output=True, text=True)
            if proc.returncode != 0:
                print(proc.stdout, proc.stderr, file=sys.stderr)
                raise SystemExit(f"{method} failed")
            runs[method].append(json.loads(proc.stdout.strip().splitlines()[-1]))
            remaining[method] = remaining_snapshots(workdir)
            r = runs[method][-1]
            print(f"{method}: call {r['call_s']:.2f} s, total {r['seconds']:.2f} s, {r['counts']}", file=sys.stderr)

    problems = []
    if runs["lakehouse"]:
        if remaining["lakehouse"] != remaining["pyiceberg"]:
            problems.append("lakehouse and pyiceberg keep different snapshots")
        if remaining["lakehouse_dry_run"] == remaining["lakehouse"]:
            problems.append("the dry run expired snapshots")
        if "expected_expired" in facts and runs["lakehouse"][-1]["counts"].get("snapshot") != facts["expected_expired"]:
            problems.append(f"expected {facts['expected_expired']} expired snapshots")
        if runs["lakehouse"][-1]["counts"].get("data_file") or runs["lakehouse"][-1]["counts"].get("delete_file"):
            problems.append("an append-only history freed data files")
    callgrind = None
    if args.callgrind or args.callgrind_pyiceberg:
        callgrind = run_callgrind(facts, bench_dir, extension, args.callgrind_pyiceberg)
    shutil.rmtree(facts["table"], ignore_errors=True)
    if metadata_stats(facts) != (metadata_files, metadata_bytes):
        problems.append("the pristine copy changed")

    import duckdb
    import pyiceberg

    ext = Path(extension)
    ext_name = ext.relative_to(REPO_ROOT) if ext.is_relative_to(REPO_ROOT) else ext
    if args.history == "demo":
        command = "LAKEHOUSE_EXTENSION=build/release/lakehouse.duckdb_extension .venv/bin/python bench/bench_expire.py"
        table_line = (
            f"Table: `lakehouse_demo(scale := 0.0001, snapshots := {snapshots}, history_days := 14)` — {snapshots} "
            f"snapshots over 14 days (fast appends: every manifest list carries every earlier manifest), "
            f"{metadata_files} metadata files ({metadata_bytes / 1024 / 1024:.0f} MiB); retention "
            f"{RETENTION_DAYS} days before now.")
    else:
        command = ("LAKEHOUSE_EXTENSION=build/release/lakehouse.duckdb_extension .venv/bin/python bench/bench_expire.py "
                   f"--history merged" + (f" --snapshots {snapshots}" if snapshots != 20000 else "")
                   + (" --callgrind" if args.callgrind else "") + (" --callgrind-pyiceberg" if args.callgrind_pyiceberg else ""))
        table_line = (
            f"Table: a metadata-only history written by `bench_expire.py --history merged` with pyiceberg's writers "
            f"(built in {facts['build_s']:.0f} s on {facts['built']}): {snapshots} append snapshots over "
            f"{args.history_days:g} days, one data file each (partitioned by day; no data file exists), manifests merged "
            f"at {args.merge_at} as Java's MergeAppend does ({facts['merges']} merges; each list holds the merged "
            f"manifest and at most {args.merge_at - 1} newer ones), {metadata_files} metadata files "
            f"({metadata_bytes / 1024 / 1024:.0f} MiB). Cutoff fixed at build time (newest snapshot − "
            f"{RETENTION_DAYS} days, between two snapshots): {facts['expected_expired']} snapshots older.")
    lines = [
        f"# Snapshot expiry benchmark: {snapshots} snapshots ({args.history} history)",
        "",
        f"Reproduce: `{command}`",
        "",
        table_line,
        "",
    ]
    if runs["lakehouse"]:
        results = {m: median_result(rs, "call_s") for m, rs in runs.items()}
        totals = {m: statistics.median(r["seconds"] for r in rs) for m, rs in runs.items()}
        ours, ours_total = results["lakehouse"]["call_s"], totals["lakehouse"]
        lines += [
            f"{args.repeat} runs per method (alternating), each in its own process on a fresh copy, medians shown; "
            f"{dt.date.today().isoformat()}; {platform.machine()}, {os.cpu_count()} CPUs, load average "
            f"{os.getloadavg()[0]:.2f} at the end, Python {platform.python_version()}; duckdb {duckdb.__version__}, pyiceberg "
            f"{pyiceberg.__version__}; extension `{ext_name}`. Call: the expiry itself (lakehouse: the query; "
            f"pyiceberg: load_table + expire + commit); total: with the setup in the process (connect + LOAD; the "
            f"SqlCatalog). Peak RSS: the process's, interpreter and imports included.",
            "",
            "| method | call s (median) | call ratio to lakehouse | total s (median) | total ratio | peak RSS MiB "
            "| snapshots expired | files deleted | all runs, call s |",
            "|---|---:|---:|---:|---:|---:|---:|---|---|",
        ]
        for method in METHODS:
            r = results[method]
            files = ", ".join(f"{v} {k}" for k, v in sorted(r["counts"].items()) if k != "snapshot")
            lines.append(
                f"| {method} | {r['call_s']:.2f} | {r['call_s'] / ours:.2f}× | {totals[method]:.2f} | "
                f"{totals[method] / ours_total:.2f}× | {r['peak_rss_mib']:.0f} | {r['counts'].get('snapshot', 0)} | "
                f"{files if method != 'pyiceberg' else 'none (metadata only)'} | "
                + ", ".join(f"{x['call_s']:.2f}" for x in runs[method]) + " |")
        lines += ["", "Both leave the same snapshots: " + ("yes" if not problems else "NO — " + "; ".join(problems))]
    if callgrind:
        totals_cg, top = callgrind
        base = totals_cg["baseline"]["ir"]
        lines += [
            "",
            "## Instruction counts (valgrind --tool=callgrind, one run each, all threads)",
            "",
            "Baseline: the same child process with `SELECT 1` instead of the expiry (Python, imports, connect, "
            "LOAD); Ir over baseline is the expiry's own count."
            + (" pyiceberg's baseline: the process with its SqlCatalog and nothing else." if "pyiceberg" in totals_cg else ""),
            "",
            "| run | Ir | Ir over baseline | snapshots expired |",
            "|---|---:|---:|---:|",
        ]
        for run, t in totals_cg.items():
            b = totals_cg["pyiceberg_baseline"]["ir"] if run == "pyiceberg" else base
            over = f"{t['ir'] - b:,}" if "baseline" not in run else "—"
            lines.append(f"| {run} | {t['ir']:,} | {over} | {t['counts'].get('snapshot', '—')} |")
        if "pyiceberg" in totals_cg:
            ratio = (totals_cg["pyiceberg"]["ir"] - totals_cg["pyiceberg_baseline"]["ir"]) / max(1, totals_cg["lakehouse"]["ir"] - base)
            lines += ["", f"pyiceberg / lakehouse, Ir over baseline: {ratio:.2f}×"]
        lines += ["", "Top functions of the lakehouse run by self cost (callgrind_annotate):", "", "```", top, "```"]
    text = "\n".join(lines) + "\n"
    print(text)
    output.write_text(text)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
