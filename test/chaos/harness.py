"""Chaos: writers we did not write, our maintenance interleaved at random, kills, and a model.

A seeded run builds one table (Iceberg on a sqlite SQL catalog, or Delta on local disk) and then
takes random steps:

- a writer operation (writer.py, its own process: pyiceberg or deltalake appends, deletes,
  partition overwrites, added columns, an evolved partition spec);
- one of our actions in the DuckDB CLI (compaction with a random strategy, target and stitching;
  the gate; snapshot expiry; manifest rewrite; position-delete rewrite; orphan removal; VACUUM),
  alone, or with a writer committing while it runs (often while it pauses before its commit, the
  debug build's test hook), or killed with SIGKILL at a random moment (before its writes, between
  them and the commit, inside it, during its deletes);
- a quiesced cleanup (orphan removal / VACUUM with no age or retention) followed by a check that
  nothing unreferenced is left.

The model is what each writer reported committed (rows by key). After every step the table, read
by the writer's own library, must equal the model as a multiset (a resurrected, lost or duplicated
row fails); every few steps and at the end DuckDB's iceberg/delta extension must read the same;
every file a retained snapshot (Iceberg: every snapshot in the metadata; Delta: every version
since the last zero-retention VACUUM) references must exist. Our actions never change rows, so
the model only moves with the writers. An action may fail with a commit conflict (counted); any
other error, a non-zero writer exit or a broken invariant stops the run with its seed.

Replay: ``python test/chaos/harness.py --format F --seed S --steps N`` takes the same steps with
the same parameters (kill moments are wall-clock, so a kill may land elsewhere).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "integration"))
sys.path.insert(0, str(HERE))

import conftest as c  # noqa: E402  (extension paths only)
from test_expire_iceberg import files_needed  # noqa: E402

PARTITIONS = 4
NAMESPACE = "chaos"
CATALOG = "chaos"  # the sqlite catalog's name, as pyiceberg, Spark's JDBC catalog and we name it
TABLE = "events"
WRITER = HERE / "writer.py"
CONFLICT = "commit conflict"
# What the gate's `commit` column says of a partition re-planned after a conflict, and of one
# given up (partial progress).
RETRIED = "retried"
GAVE_UP = "conflict: gave up"


class ChaosFailure(AssertionError):
    """A broken invariant or an unexpected error; the message carries the seed and the trail."""


def duckdb_cli() -> str:
    """The DuckDB CLI binary itself (the pip package's ``duckdb`` command is a Python wrapper,
    which a SIGKILL would not reach through)."""
    import duckdb_cli as package

    return str(Path(package.__file__).parent / "duckdb")


def local_path(uri: str) -> str:
    """A local file's path from ``file:///x`` (pyiceberg, us) or ``file:/x`` (Java, Spark)."""
    for prefix in ("file://", "file:"):
        if uri.startswith(prefix):
            return uri[len(prefix):]
    return uri


def sql_text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return repr(value)


def named(params: dict) -> str:
    return "".join(f", {k} := {sql_text(v)}" for k, v in params.items())


def call(function: str, target: str, params: dict) -> str:
    """``SELECT * FROM lakehouse_<function>(<target>, <params>)``."""
    return f"SELECT * FROM lakehouse_{function}({target}{named(params)})"


@dataclass
class Model:
    """The rows the writers committed, by key."""

    rows: dict[int, tuple[int, str]] = field(default_factory=dict)
    next_id: int = 0

    def fresh_rows(self, rng: random.Random, count: int, p: int | None = None) -> list[list]:
        out = []
        for _ in range(count):
            part = rng.randrange(PARTITIONS) if p is None else p
            out.append([self.next_id, part, f"v{self.next_id}-{rng.randrange(10**6)}"])
            self.next_id += 1
        return out

    def apply(self, op: dict) -> None:
        kind = op["op"]
        if kind == "append":
            self.rows.update({r[0]: (r[1], r[2]) for r in op["rows"]})
        elif kind in ("delete", "spark_delete"):
            for key in op["ids"]:
                self.rows.pop(key, None)
        elif kind in ("spark_update", "spark_merge"):
            self.rows.update({r[0]: (r[1], r[2]) for r in op["rows"]})
        elif kind == "overwrite":
            self.rows = {k: v for k, v in self.rows.items() if v[0] != op["p"]}
            self.rows.update({r[0]: (r[1], r[2]) for r in op["rows"]})

    def expected(self) -> list[tuple]:
        return sorted((k, p, v) for k, (p, v) in self.rows.items())


# --------------------------------------------------------------------------- the two table kinds


class IcebergSubject:
    """An Iceberg table (v1 or v2) on a sqlite SQL catalog; pyiceberg writes and reads it."""

    format = "iceberg"
    actions = ("compact", "compact", "gate", "expire", "rewrite_manifests", "rewrite_position_deletes", "orphans")

    def __init__(self, root: Path, rng: random.Random, spark: bool):
        from pyiceberg.catalog.sql import SqlCatalog
        from pyiceberg.partitioning import PartitionField, PartitionSpec
        from pyiceberg.schema import Schema
        from pyiceberg.transforms import IdentityTransform
        from pyiceberg.types import IntegerType, LongType, NestedField, StringType

        root.mkdir(parents=True)
        self.uri = f"sqlite:///{root}/catalog.db"
        self.warehouse = f"file://{root}/warehouse"
        self.name = f"{NAMESPACE}.{TABLE}"
        if spark:
            # Spark's JDBC pool keeps a read transaction open between statements; in WAL mode
            # that does not lock the other writers out (they would wait, then fail "locked").
            import sqlite3

            with sqlite3.connect(root / "catalog.db") as db:
                db.execute("PRAGMA journal_mode=WAL")
        self.catalog = SqlCatalog(CATALOG, uri=self.uri, warehouse=self.warehouse)
        self.catalog.create_namespace(NAMESPACE)
        schema = Schema(NestedField(1, "id", LongType()), NestedField(2, "p", IntegerType()),
                        NestedField(3, "val", StringType()))
        spec = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="p"))
        self.version = 2 if spark else rng.choice([1, 2])  # Spark's merge-on-read needs v2
        self.root = root
        self.catalog.create_table(self.name, schema, partition_spec=spec,
                                  properties={"format-version": str(self.version)})
        self.spec_evolved = False

    def describe(self) -> str:
        return f"Iceberg v{self.version} on a sqlite catalog"

    def writer_fields(self) -> dict:
        return {"format": "iceberg", "catalog_uri": self.uri, "warehouse": self.warehouse, "table": self.name,
                "catalog": CATALOG}

    def writer_kinds(self) -> list[str]:
        return [] if self.spec_evolved else ["evolve_spec"]

    def evolved(self, op: dict) -> None:
        if op["op"] == "evolve_spec":
            self.spec_evolved = True

    def target(self) -> str:
        return f"'{self.name}', catalog := '{CATALOG}', catalog_uri := {sql_text(self.uri)}"

    def table(self):
        return self.catalog.load_table(self.name)

    def read_rows(self) -> list[tuple]:
        arrow = self.table().scan(selected_fields=("id", "p", "val")).to_arrow()
        return sorted(zip(arrow["id"].to_pylist(), arrow["p"].to_pylist(), arrow["val"].to_pylist()))

    def read_rows_duckdb(self) -> list[tuple]:
        con = c.new_connection()
        try:
            c.load_iceberg(con)
            metadata = self.table().metadata_location
            return sorted(con.execute(f"SELECT id, p, val FROM iceberg_scan({sql_text(metadata)})").fetchall())
        finally:
            con.close()

    def referenced(self) -> set[str]:
        """Every file the metadata references: manifest lists, manifests, data and delete files of
        every snapshot, the current and logged metadata files, statistics files."""
        table = self.table()
        out = {c.local_path(table.metadata_location)}
        out |= {c.local_path(entry.metadata_file) for entry in table.metadata.metadata_log}
        out |= {c.local_path(stats.statistics_path) for stats in table.metadata.statistics}
        return {local_path(p) for p in out | files_needed(table)}

    def delete_files(self) -> int:
        """Live delete files (the current snapshot's summary), to show the run had deletes to apply."""
        snapshot = self.table().current_snapshot()
        return int(snapshot.summary.get("total-delete-files", 0)) if snapshot and snapshot.summary else 0

    def live_referenced(self) -> set[str]:
        """The files the retained snapshots reference (the metadata log's files may be gone)."""
        table = self.table()
        logged = {local_path(entry.metadata_file) for entry in table.metadata.metadata_log}
        return self.referenced() - logged

    def location(self) -> Path:
        return Path(local_path(self.table().location()))

    def action_sql(self, action: str, rng: random.Random, quiesced: bool) -> str:
        target = self.target()
        if action == "compact":
            return call("compact", target, compaction_params(rng))
        if action == "gate":
            return call("gate", target, {**compaction_params(rng), **expiry_params(rng), "measure_speedup": False})
        if action == "expire":
            params = {**expiry_params(rng), "clean_expired_metadata": rng.random() < 0.5, "dry_run": False}
            return call("expire_snapshots", target, params)
        if action in ("rewrite_manifests", "rewrite_position_deletes"):
            return call(action, target, {"dry_run": False})
        if action == "orphans":
            return self.cleanup_sql() if quiesced else call("remove_orphan_files", target, {"dry_run": False})
        raise ValueError(action)

    def cleanup_sql(self) -> str:
        params = {"older_than_days": 0, "allow_young_orphans": True, "dry_run": False}
        return call("remove_orphan_files", self.target(), params)

    def after_cleanup(self) -> None:
        pass


class DeltaSubject:
    """A Delta table on local disk, partitioned by p; deltalake writes and reads it."""

    format = "delta"
    actions = ("compact", "compact", "gate", "vacuum")

    def __init__(self, root: Path, rng: random.Random, spark: bool):
        from deltalake import write_deltalake

        import writer

        root.mkdir(parents=True)
        self.path = root / "events"
        schema = writer.pa.schema([("id", writer.pa.int64()), ("p", writer.pa.int32()), ("val", writer.pa.string())])
        write_deltalake(str(self.path), writer.rows_table([], schema), partition_by=["p"])
        self.safe_version = 0  # the table at every version from here on must be readable in full

    def describe(self) -> str:
        return "Delta (deltalake) on local disk"

    def writer_fields(self) -> dict:
        return {"format": "delta", "path": str(self.path)}

    def writer_kinds(self) -> list[str]:
        return []

    def evolved(self, op: dict) -> None:
        pass

    def target(self) -> str:
        return sql_text(str(self.path))

    def current_version(self) -> int:
        from deltalake import DeltaTable

        return DeltaTable(str(self.path)).version()

    def read_rows(self) -> list[tuple]:
        from deltalake import DeltaTable

        import pyarrow as pa

        arrow = pa.table(DeltaTable(str(self.path)).to_pyarrow_table(columns=["id", "p", "val"]))
        return sorted(zip(arrow["id"].to_pylist(), arrow["p"].to_pylist(), arrow["val"].to_pylist()))

    def read_rows_duckdb(self) -> list[tuple]:
        con = c.new_connection()
        try:
            con.execute(f"LOAD '{c.pip_extension_path('delta')}'")
            return sorted(con.execute(f"SELECT id, p, val FROM delta_scan({sql_text(str(self.path))})").fetchall())
        finally:
            con.close()

    def version_files(self, version: int) -> set[str]:
        from deltalake import DeltaTable

        return {local_path(uri) for uri in DeltaTable(str(self.path), version=version).file_uris()}

    def live_referenced(self) -> set[str]:
        """The files of the versions a reader may still ask for: the last zero-retention VACUUM's
        version, and the three newest (older ones are checked the same way; three bounds the cost)."""
        current = self.current_version()
        versions = {self.safe_version} | set(range(max(self.safe_version, current - 2), current + 1))
        out: set[str] = set()
        for version in versions:
            out |= self.version_files(version)
        return out

    def referenced(self) -> set[str]:
        return self.version_files(self.current_version())

    def delete_files(self) -> int:
        return 0  # deltalake writes no deletion vectors

    def location(self) -> Path:
        return self.path

    def action_sql(self, action: str, rng: random.Random, quiesced: bool) -> str:
        target = self.target()
        if action == "compact":
            return call("compact", target, compaction_params(rng))
        if action == "gate":
            return call("gate", target, {**compaction_params(rng), "measure_speedup": False})
        if action == "vacuum":
            return self.cleanup_sql() if quiesced else call("vacuum", target, {"dry_run": False})
        raise ValueError(action)

    def cleanup_sql(self) -> str:
        params = {"retention_hours": 0, "enforce_retention_duration": False, "dry_run": False}
        return call("vacuum", self.target(), params)

    def after_cleanup(self) -> None:
        self.safe_version = self.current_version()


def compaction_params(rng: random.Random) -> dict:
    """Every file here is KiB-sized: thresholds in MiB fractions so that partitions degrade, and a
    4 KiB target makes several files of a partition."""
    small = rng.choice([0.004, 0.05])
    params: dict = {"small_file_threshold_mb": small, "target_file_size_mb": rng.choice([small, 0.05, 1.0]),
                    "fragmentation_ratio_threshold": rng.choice([0.0, 0.35])}
    strategy = rng.choice(["binpack", "binpack", "sort", "zorder"])
    params["strategy"] = strategy
    if strategy == "sort":
        params["sort_order"] = rng.choice(["val", "id DESC"])
    elif strategy == "zorder":
        params["sort_order"] = "id, val"
    if rng.random() < 0.3:
        params["stitch"] = rng.random() < 0.5
    if rng.random() < 0.3:
        params["min_input_files"] = rng.randint(2, 4)
    return params


def expiry_params(rng: random.Random) -> dict:
    """Retention from none (every snapshot but the last ones goes) to the default."""
    return {"snapshot_retention_days": rng.choice([0, 0.0001, 7]), "retain_last": rng.randint(1, 3)}


SUBJECTS = {"iceberg": IcebergSubject, "delta": DeltaSubject}


# --------------------------------------------------------------------------- the run


@dataclass
class Summary:
    format: str
    seed: int
    table: str = ""
    steps: int = 0
    seconds: float = 0.0
    writes: collections.Counter = field(default_factory=collections.Counter)
    actions: collections.Counter = field(default_factory=collections.Counter)
    kills: int = 0
    kill_attempts: int = 0
    concurrent: int = 0
    conflicts: int = 0
    steps_with_delete_files: int = 0
    checks: collections.Counter = field(default_factory=collections.Counter)

    def as_dict(self) -> dict:
        return {"format": self.format, "seed": self.seed, "table": self.table, "steps": self.steps,
                "seconds": round(self.seconds, 1), "writes": dict(self.writes), "actions": dict(self.actions),
                "kills": self.kills, "kill_attempts": self.kill_attempts, "concurrent_writes": self.concurrent,
                "conflicts": self.conflicts, "steps_with_delete_files": self.steps_with_delete_files,
                "checks": dict(self.checks)}


# --------------------------------------------------------------------------- writers


class ProcessWrite:
    """One writer.py operation in a process of its own."""

    def __init__(self, op: dict, wait: bool):
        self.proc = subprocess.Popen([sys.executable, str(WRITER), json.dumps({**op, "wait": wait})],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, cwd=HERE)
        self.error = ""
        if wait and self.proc.stdout.readline().strip() != "ready":
            self.error = f"the writer did not start: {self.proc.communicate()[1][-2000:]}"

    def go(self) -> None:
        if not self.error:
            self.proc.stdin.write("go\n")
            self.proc.stdin.flush()

    def outcome(self) -> dict:
        if self.error:
            return {"ok": False, "error": self.error}
        out, err = self.proc.communicate(input=None if self.proc.stdin.closed else "", timeout=300)
        if self.proc.returncode != 0:
            return {"ok": False, "error": f"exit {self.proc.returncode}: {err.strip()[-2000:]}"}
        return json.loads(out.strip().splitlines()[-1])


class SparkWriter:
    """spark_writer.py: one SparkSession for the whole run, an operation per JSON line."""

    def __init__(self, subject: IcebergSubject):
        scratch = subject.root / "spark"
        scratch.mkdir()
        self.log = (subject.root / "spark.log").open("w")
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "spark_writer.py"), subject.uri.removeprefix("sqlite:///"), subject.warehouse,
             subject.name, str(scratch)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True, cwd=HERE)
        if self.receive().get("ready") is not True:
            raise ChaosFailure(f"Spark did not start (see {subject.root / 'spark.log'})")

    def send(self, op: dict) -> None:
        self.proc.stdin.write(json.dumps(op) + "\n")
        self.proc.stdin.flush()

    def receive(self) -> dict:
        """The next JSON object the writer prints (the JVM may print other lines)."""
        while True:
            line = self.proc.stdout.readline()
            if not line:
                return {"ok": False, "error": f"Spark exited ({self.proc.poll()}), see its log"}
            if line.startswith("{"):
                return json.loads(line)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


class SparkWrite:
    """One operation of the run's SparkWriter."""

    def __init__(self, writer: SparkWriter, op: dict, wait: bool):
        self.writer, self.op, self.sent = writer, op, False
        if not wait:
            self.go()

    def go(self) -> None:
        self.writer.send(self.op)
        self.sent = True

    def outcome(self) -> dict:
        if not self.sent:
            self.go()
        return self.writer.receive()


# --------------------------------------------------------------------------- the run


class Run:
    def __init__(self, fmt: str, seed: int, root: Path, extension: Path, spark: bool = False):
        self.rng = random.Random(seed)
        self.seed = seed
        self.fmt = fmt
        self.extension = extension
        self.cli = duckdb_cli()
        self.model = Model()
        self.subject = SUBJECTS[fmt](root, self.rng, spark)
        self.summary = Summary(fmt, seed, self.subject.describe() + (", Spark writing too" if spark else ""))
        self.trail: list[str] = []
        self.durations: dict[str, float] = collections.defaultdict(lambda: 1.0)
        self.columns_added = 0
        self.spark = SparkWriter(self.subject) if spark else None

    def close(self) -> None:
        if self.spark is not None:
            self.spark.close()

    # ---- failures

    def fail(self, message: str) -> None:
        trail = "\n  ".join(self.trail[-12:])
        raise ChaosFailure(f"chaos {self.fmt} seed={self.seed} step={self.summary.steps}: {message}\n"
                           f"  last steps:\n  {trail}\n"
                           f"  replay: python test/chaos/harness.py --format {self.fmt} --seed {self.seed} "
                           f"--steps {self.summary.steps}")

    # ---- writers

    def writer_op(self) -> dict:
        rng = self.rng
        kinds = ["append"] * 5 + ["delete"] * 3 + ["overwrite"] * 2
        if self.columns_added < 2:
            kinds.append("add_column")
        kinds += self.subject.writer_kinds()
        if self.spark is not None:
            kinds += ["spark_delete"] * 3 + ["spark_update"] * 2 + ["spark_merge"] * 2
        kind = rng.choice(kinds)
        if kind in ("delete", "overwrite", "spark_delete", "spark_update") and not self.model.rows:
            kind = "append"
        op = {**self.subject.writer_fields(), "op": kind}
        if kind == "append":
            op["rows"] = self.model.fresh_rows(rng, rng.randint(1, 40))
        elif kind in ("delete", "spark_delete"):
            keys = sorted(self.model.rows)
            op["ids"] = rng.sample(keys, min(len(keys), rng.randint(1, 12)))
        elif kind in ("spark_update", "spark_merge"):
            keys = sorted(self.model.rows)
            changed = rng.sample(keys, min(len(keys), rng.randint(0 if kind == "spark_merge" else 1, 8)))
            op["rows"] = [[k, self.model.rows[k][0], f"u{k}-{rng.randrange(10**6)}"] for k in changed]
            if kind == "spark_merge":
                op["rows"] += self.model.fresh_rows(rng, rng.randint(0, 8))
        elif kind == "overwrite":
            op["p"] = rng.randrange(PARTITIONS)
            op["rows"] = self.model.fresh_rows(rng, rng.randint(0, 20), p=op["p"])
        elif kind == "add_column":
            self.columns_added += 1
            op["name"] = f"extra_{self.columns_added}"
        return op

    def start_writer(self, op: dict, wait: bool = False) -> ProcessWrite | SparkWrite:
        """The operation's writer; with `wait` it is ready (imports done) and waits for `go()`."""
        if op["op"].startswith("spark_"):
            return SparkWrite(self.spark, op, wait)
        return ProcessWrite(op, wait)

    def finish_writer(self, op: dict, write: ProcessWrite | SparkWrite) -> None:
        outcome = write.outcome()
        label = f"write {op['op']}"
        if "error" in outcome:
            self.fail(f"{label}: the writer failed: {outcome['error']}")
        if outcome["ok"]:
            self.model.apply(op)
            self.subject.evolved(op)
            self.summary.writes[op["op"]] += 1
            self.trail.append(f"{label}: committed")
        else:
            missing = outcome.get("missing")
            if missing is not None and (not missing or local_path(missing) in self.subject.live_referenced()):
                self.fail(f"{label}: a file the table still references is missing: {outcome['conflict']}")
            self.summary.writes[op["op"] + (" (base expired)" if missing else " (conflict)")] += 1
            self.summary.conflicts += 1
            self.trail.append(f"{label}: conflict ({outcome['conflict'][:120]})")

    # ---- our actions

    def start_action(self, sql: str, pause_ms: int) -> subprocess.Popen:
        env = dict(os.environ)
        if pause_ms:
            env["LAKEHOUSE_TEST_PAUSE_BEFORE_COMMIT_MS"] = str(pause_ms)
        else:
            env.pop("LAKEHOUSE_TEST_PAUSE_BEFORE_COMMIT_MS", None)
        proc = subprocess.Popen([self.cli, "-unsigned", "-csv", "-c", f"LOAD '{self.extension}'; {sql}"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        proc.paused = bool(pause_ms)  # type: ignore[attr-defined]
        return proc

    def finish_action(self, name: str, sql: str, proc: subprocess.Popen, started: float, killed: bool) -> None:
        out, err = proc.communicate(timeout=600)
        elapsed = time.monotonic() - started
        text = (out + err).lower()
        if killed:
            outcome = "killed"
            self.summary.kills += 1
        elif proc.returncode == 0:
            outcome = "ok"
            if not proc.paused:  # the usual duration, which kill moments are drawn from
                self.durations[name] = 0.7 * self.durations[name] + 0.3 * elapsed
            if GAVE_UP in text:  # partial progress: a partition lost to conflicts, reported in its row
                outcome = "ok, a partition given up"
                self.summary.conflicts += 1
            elif RETRIED in text:  # partial progress: a partition re-planned after a conflict
                outcome = "ok, a partition retried"
                self.summary.conflicts += 1
            elif CONFLICT in text:  # a later step's conflict the gate left for the next run
                outcome = "ok, conflict reported"
                self.summary.conflicts += 1
        elif CONFLICT in text:
            outcome = "conflict"
            self.summary.conflicts += 1
        else:
            self.fail(f"{name} failed (exit {proc.returncode}): {(err or out).strip()[-2000:]}\n  sql: {sql}")
        if "panic" in text:
            self.fail(f"{name} panicked: {text[-2000:]}")
        self.summary.actions[f"{name}: {outcome}"] += 1
        self.trail.append(f"{name} [{elapsed:.1f}s] {outcome}: {sql}")

    def action(self, mode: str) -> None:
        rng = self.rng
        name = rng.choice(self.subject.actions)
        sql = self.subject.action_sql(name, rng, quiesced=False)
        expected = self.durations[name]
        pause_ms = rng.choice([0, 0, 300, 1500]) if mode != "alone" else 0
        # Kill moments spread over the action's usual run (its writes, the pause, the commit, the
        # deletes after it); a kill that comes after the end is counted as an attempt only.
        kill_after = rng.uniform(0.0, expected + pause_ms / 1000.0) if mode == "kill" else None
        op = self.writer_op() if mode == "writer" else None
        writer_after = rng.uniform(0.0, expected) if op else None

        writer = self.start_writer(op, wait=True) if op else None
        started = time.monotonic()
        proc = self.start_action(sql, pause_ms)
        killed = False
        if writer is not None:
            time.sleep(writer_after)
            writer.go()
            self.summary.concurrent += 1
        if kill_after is not None:
            self.summary.kill_attempts += 1
            deadline = started + kill_after
            while proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.01)
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                killed = True
        self.finish_action(name, sql, proc, started, killed)
        if writer is not None:
            self.finish_writer(op, writer)

    def cleanup(self) -> None:
        """Orphan removal / VACUUM with no age on a quiesced table, then nothing unreferenced may
        remain under the table's location (Delta: outside ``_delta_log``)."""
        sql = self.subject.cleanup_sql()
        started = time.monotonic()
        self.finish_action("cleanup", sql, self.start_action(sql, 0), started, killed=False)
        self.subject.after_cleanup()
        referenced = self.subject.referenced()
        root = self.subject.location()
        # Hidden files (Hadoop's `.x.parquet.crc` checksums beside Spark's files) are the known
        # leftovers: orphan removal never deletes them, as Java's does not (its hidden-path filter).
        left = sorted(str(p) for p in root.rglob("*")
                      if p.is_file() and "_delta_log" not in p.parts and not p.name.startswith(".")
                      and str(p) not in referenced)
        self.summary.checks["nothing unreferenced after cleanup"] += 1
        if left:
            self.fail(f"{len(left)} unreferenced files after a zero-age cleanup: {left[:8]}")

    # ---- invariants

    def check(self, with_duckdb: bool) -> None:
        expected = self.model.expected()
        try:
            rows = self.subject.read_rows()
        except Exception as error:  # noqa: BLE001 - an unreadable table is the finding
            self.fail(f"the table cannot be read: {type(error).__name__}: {error}")
        self.summary.checks["rows = model (writer's library)"] += 1
        if self.subject.delete_files():
            self.summary.steps_with_delete_files += 1
        if rows != expected:
            self.fail(diff("writer's library", rows, expected))
        if with_duckdb:
            rows = self.subject.read_rows_duckdb()
            self.summary.checks["rows = model (DuckDB)"] += 1
            if rows != expected:
                self.fail(diff("DuckDB", rows, expected))
        missing = sorted(p for p in self.subject.live_referenced() if not os.path.exists(p))
        self.summary.checks["referenced files exist"] += 1
        if missing:
            self.fail(f"{len(missing)} referenced files are missing: {missing[:8]}")

    # ---- the loop

    def step(self) -> None:
        mode = self.rng.choices(["write", "alone", "writer", "kill", "cleanup"], weights=[5, 3, 3, 3, 1])[0]
        if mode == "write":
            op = self.writer_op()
            self.finish_writer(op, self.start_writer(op))
        elif mode == "cleanup":
            self.cleanup()
        else:
            self.action(mode)
        self.summary.steps += 1
        self.check(with_duckdb=self.summary.steps % 5 == 0)

    def run(self, seconds: float | None, steps: int | None) -> Summary:
        try:
            return self._run(seconds, steps)
        finally:
            self.close()

    def _run(self, seconds: float | None, steps: int | None) -> Summary:
        started = time.monotonic()
        for _ in range(3):  # a table with something in it
            op = self.writer_op() if self.model.rows else {**self.subject.writer_fields(), "op": "append",
                                                          "rows": self.model.fresh_rows(self.rng, 30)}
            self.finish_writer(op, self.start_writer(op))
        while True:
            if steps is not None and self.summary.steps >= steps:
                break
            if seconds is not None and time.monotonic() - started >= seconds:
                break
            self.step()
        self.cleanup()
        self.check(with_duckdb=True)
        self.summary.seconds = time.monotonic() - started
        return self.summary


def diff(reader: str, rows: list[tuple], expected: list[tuple]) -> str:
    got, want = collections.Counter(rows), collections.Counter(expected)
    extra, lost = got - want, want - got
    return (f"{reader} reads {len(rows)} rows, the model has {len(expected)}: "
            f"{sum(extra.values())} extra (resurrected or duplicated) e.g. {sorted(extra)[:5]}, "
            f"{sum(lost.values())} lost e.g. {sorted(lost)[:5]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--format", choices=sorted(SUBJECTS), action="append")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--seconds", type=float, default=None, help="per format (default 60 unless --steps)")
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--spark", action="store_true", help="Iceberg: Apache Spark writes merge-on-read too")
    parser.add_argument("--root", type=Path, default=None, help="where the tables go (default: a temp dir)")
    parser.add_argument("--json", type=Path, default=None, help="append each run's summary here, a line each")
    args = parser.parse_args(argv)
    import tempfile

    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(10**9)
    seconds = args.seconds if args.seconds is not None or args.steps is not None else 60.0
    extension = c.lakehouse_extension_path()
    root = args.root or Path(tempfile.mkdtemp(prefix="lakehouse-chaos-"))
    failed = False
    for fmt in args.format or sorted(SUBJECTS):
        run = Run(fmt, seed, root / f"{fmt}-{seed}", extension, spark=args.spark and fmt == "iceberg")
        when = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
        host = f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}"
        failure = ""
        try:
            summary = run.run(seconds, args.steps)
        except ChaosFailure as error:
            print(error, file=sys.stderr)
            summary, failure = run.summary, str(error).splitlines()[0]
        failed = failed or bool(failure)
        record = {**summary.as_dict(), "when": when, "host": host, "failed": bool(failure), "failure": failure}
        print(json.dumps(record))
        if args.json:
            with args.json.open("a") as out:
                out.write(json.dumps(record) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
