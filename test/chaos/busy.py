"""The gate on a busy table: the share of degraded partitions it compacts while another writer
deletes rows every few seconds, with partial progress off (one commit, all or nothing) and on
(a commit per partition, a lost partition re-planned and retried), on the same data.

Each run builds a fresh table (pyiceberg on a sqlite catalog, or deltalake): ``--partitions``
partitions of ``--files`` small files each, every one degraded. A writer process of the same
library deletes one random live row of a random partition every ``--delete-every`` seconds
(copy-on-write: the file holding it is replaced, so a compaction that read it conflicts) from
just before the gate starts until it ends. Then the table is read back by the writer's library
and must hold exactly the rows built less the rows deleted. The modes alternate (off first on
even runs) so that neither always runs on a warmer machine.

Usage: ``python busy.py --format iceberg|delta --runs 3 --jsonl out.jsonl``; prints one JSON line
per gate run, appended to ``--jsonl``. ``busy_report.py`` turns them into a table.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "integration"))

import conftest as c  # noqa: E402  (the extension's path)
from harness import duckdb_cli  # noqa: E402  (the CLI's real binary)

NAMESPACE, TABLE, CATALOG = "busy", "events", "busy"


def rows(start: int, count: int, partition: int, width: int) -> pa.Table:
    """Rows of random text (incompressible, so files have the size their rows say)."""
    ids = list(range(start, start + count))
    noise = os.urandom(count * width // 2).hex()
    return pa.table({"id": pa.array(ids, pa.int64()), "p": pa.array([partition] * count, pa.int32()),
                     "val": pa.array([noise[k * width:(k + 1) * width] for k in range(count)])})


def build(fmt: str, root: Path, partitions: int, files: int, per_file: int, width: int) -> dict:
    """The table, and what the writer process needs to open it; every id built."""
    next_id = 0
    if fmt == "iceberg":
        from pyiceberg.catalog.sql import SqlCatalog
        from pyiceberg.partitioning import PartitionField, PartitionSpec
        from pyiceberg.schema import Schema
        from pyiceberg.transforms import IdentityTransform
        from pyiceberg.types import IntegerType, LongType, NestedField, StringType

        uri, warehouse = f"sqlite:///{root}/catalog.db", f"file://{root}/warehouse"
        catalog = SqlCatalog(CATALOG, uri=uri, warehouse=warehouse)
        catalog.create_namespace(NAMESPACE)
        schema = Schema(NestedField(1, "id", LongType()), NestedField(2, "p", IntegerType()),
                        NestedField(3, "val", StringType()))
        spec = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="p"))
        table = catalog.create_table(f"{NAMESPACE}.{TABLE}", schema, partition_spec=spec)
        for _ in range(files):
            batch = []
            for p in range(partitions):
                batch.append(rows(next_id, per_file, p, width))
                next_id += per_file
            table.append(pa.concat_tables(batch).cast(table.schema().as_arrow()))
        target = f"'{NAMESPACE}.{TABLE}', catalog := '{CATALOG}', catalog_uri := '{uri}'"
        return {"format": fmt, "uri": uri, "warehouse": warehouse, "target": target, "ids": next_id}
    from deltalake import write_deltalake

    path = root / "events"
    for _ in range(files):
        batch = []
        for p in range(partitions):
            batch.append(rows(next_id, per_file, p, width))
            next_id += per_file
        write_deltalake(str(path), pa.concat_tables(batch), mode="append", partition_by=["p"])
    return {"format": fmt, "path": str(path), "target": f"'{path}'", "ids": next_id}


WRITER = r'''
import json, random, sys, time
spec = json.loads(sys.argv[1])
rng = random.Random(spec["seed"])
deleted = set()
log = open(spec["log"], "a")
if spec["format"] == "iceberg":
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.expressions import EqualTo
    catalog = SqlCatalog("busy", uri=spec["uri"], warehouse=spec["warehouse"])
    def delete(i):
        catalog.load_table("busy.events").delete(EqualTo("id", i))
else:
    from deltalake import DeltaTable
    def delete(i):
        DeltaTable(spec["path"]).delete(f"id = {i}")
print("ready", flush=True)
sys.stdin.readline()
while True:
    started = time.monotonic()
    i = rng.randrange(spec["ids"])
    if i not in deleted:
        try:
            delete(i)
            deleted.add(i)
            log.write(f"{i}\n"); log.flush()
        except Exception as e:  # a conflict with our commit: the row stays; try another later
            log.write(f"conflict {type(e).__name__}\n"); log.flush()
    time.sleep(max(0.0, spec["every"] - (time.monotonic() - started)))
'''


def live_ids(table: dict) -> list[int]:
    if table["format"] == "iceberg":
        from pyiceberg.catalog.sql import SqlCatalog

        catalog = SqlCatalog(CATALOG, uri=table["uri"], warehouse=table["warehouse"])
        arrow = catalog.load_table(f"{NAMESPACE}.{TABLE}").scan(selected_fields=("id",)).to_arrow()
    else:
        from deltalake import DeltaTable

        arrow = DeltaTable(table["path"]).to_pyarrow_table(columns=["id"])
    return sorted(arrow["id"].to_pylist())


def gate_run(args, run: int, partial: bool, seed: int) -> dict:
    root = Path(tempfile.mkdtemp(prefix="busy-"))
    try:
        table = build(args.format, root, args.partitions, args.files, args.rows, args.width)
        log = root / "deleted.txt"
        spec = {**table, "seed": seed, "every": args.delete_every, "log": str(log)}
        writer = subprocess.Popen([sys.executable, "-c", WRITER, json.dumps(spec)], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        assert writer.stdout is not None and writer.stdout.readline().strip() == "ready"
        sql = (f"LOAD '{c.lakehouse_extension_path()}'; SELECT partition, verdict, \"commit\", status "
               f"FROM lakehouse_gate({table['target']}, small_file_threshold_mb := {args.small_mb}, "
               f"target_file_size_mb := {args.target_mb}, measure_speedup := false, stitch := {str(args.stitch).lower()}, "
               f"partial_progress := {str(partial).lower()});")
        assert writer.stdin is not None
        writer.stdin.write("go\n")
        writer.stdin.flush()
        time.sleep(args.delete_every / 2)  # the writer is under way when the gate plans
        started = time.monotonic()
        proc = subprocess.run([duckdb_cli(), "-unsigned", "-json", "-c", sql], capture_output=True,
                              text=True, timeout=1800)
        elapsed = time.monotonic() - started
        writer.terminate()
        writer.wait(timeout=30)
        lines = log.read_text().split() if log.exists() else []
        deleted = {int(x) for x in lines if x.isdigit()}
        expected = sorted(set(range(table["ids"])) - deleted)
        if live_ids(table) != expected:
            raise SystemExit(f"run {run} (partial_progress={partial}, seed {seed}): the table does not hold the "
                             f"rows built less the {len(deleted)} deleted")
        out = {"format": args.format, "run": run, "partial_progress": partial, "seed": seed,
               "delete_every": args.delete_every, "partitions": args.partitions, "deletes": len(deleted),
               "seconds": round(elapsed, 2)}
        if proc.returncode != 0:
            text = " ".join((proc.stderr or proc.stdout).split())
            error = text[text.find("lakehouse_gate:"):][:300] if "lakehouse_gate:" in text else text[-300:]
            return {**out, "compacted": 0, "retried": 0, "gave_up": 0, "error": error}
        result = json.loads(proc.stdout)
        commits = [r["commit"] or "" for r in result]
        return {**out, "compacted": sum(r["verdict"] == "compacted" for r in result),
                "retried": sum(x.startswith("retried") for x in commits),
                "gave_up": sum(x.startswith("conflict") for x in commits), "status": result[0]["status"]}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--format", choices=("iceberg", "delta"), required=True)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--files", type=int, default=10)
    parser.add_argument("--rows", type=int, default=50_000, help="rows per small file")
    parser.add_argument("--width", type=int, default=40, help="characters of padding per row")
    parser.add_argument("--delete-every", type=float, default=2.0)
    parser.add_argument("--small-mb", type=float, default=16.0)
    parser.add_argument("--target-mb", type=float, default=64.0)
    parser.add_argument("--stitch", action="store_true",
                        help="let the rewrite stitch row groups (fast); by default it re-encodes, as sorts do")
    parser.add_argument("--seed", type=int, default=20261207)
    parser.add_argument("--jsonl", type=Path)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    for run in range(args.runs):
        seed = rng.randrange(1 << 30)
        for partial in ((False, True) if run % 2 == 0 else (True, False)):
            line = json.dumps(gate_run(args, run, partial, seed))
            print(line, flush=True)
            if args.jsonl:
                with args.jsonl.open("a") as out:
                    out.write(line + "\n")
    return 0


if __name__ == "__main__":
    os.environ.pop("LAKEHOUSE_TEST_PAUSE_BEFORE_COMMIT_MS", None)
    sys.exit(main())
