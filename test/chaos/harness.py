"""Chaos: writers we did not write, our maintenance interleaved at random, kills, and a model.

A seeded run builds one table (Iceberg on a sqlite SQL catalog, or Delta on local disk) and then
takes random steps:

- a writer operation (writer.py, its own process: pyiceberg or deltalake appends, deletes,
  partition overwrites, added columns, an evolved partition spec, deltalake's RESTORE to a
  recent version; with ``--spark``, spark_writer.py's long-lived session: Spark's merge-on-read
  DELETE, UPDATE and MERGE — v2 position deletes in Parquet, Avro or ORC at random, v3 deletion
  vectors — appends, whole-partition deletes, and Iceberg's rollback_to_snapshot,
  set_current_snapshot and cherrypick_snapshot; with ``--upgrade``, the table goes from v2 to v3
  at a random early step, after which Spark writes alone, as pyiceberg does not write v3);
- one of our actions in the DuckDB CLI (compaction with a random strategy, target, stitching and
  partial progress; the gate; snapshot expiry; manifest rewrite; position-delete rewrite; orphan
  removal; VACUUM), alone, or with a writer committing while it runs (often while it pauses
  before its commit, the debug build's test hook), or killed with SIGKILL at a random moment
  (before its writes, between them and the commit, inside it, during its deletes);
- a quiesced cleanup (orphan removal / VACUUM with no age or retention) followed by a check that
  nothing unreferenced is left.

The model is what each writer reported committed (rows by key), and the rows of every snapshot
(Iceberg) or version (Delta) the table was seen equal to it at, so that a rollback, set-current,
cherry-pick or restore moves the model as it moves the table; a commit of ours carries its
parent's rows. After every step:

- the table, read by the reference (Spark with ``--spark``, else the writer's library), equals
  the model as a multiset (a resurrected, lost or duplicated row fails); pyiceberg too with
  Spark, and DuckDB's iceberg/delta extension every few steps and at the end (each skipped, and
  counted, while the table has Avro/ORC position deletes, which neither reads);
- every file a retained snapshot (Iceberg: every snapshot in the metadata; Delta: every version
  since the last zero-retention VACUUM) references exists;
- every commit of ours since the last step (history.py) reads as its parent and keeps each
  row's ``_row_id`` and ``_last_updated_sequence_number`` there (v3); a compaction's commit,
  unless re-planned after a conflict, descends from the state its action read at its start
  (Iceberg: that snapshot is among its ancestors; Delta: no RESTORE came between): a rollback in
  between must have made it a conflict;
- on v3, no two live rows share a ``_row_id``, every row has one once the head assigns them, and
  an action of ours that ran alone changed no row's lineage.

Our actions never change rows, so the model only moves with the writers. An action may fail with
a commit conflict (counted); any other error, a non-zero writer exit or a broken invariant stops
the run with its seed and the invariant's name (the summary's ``caught``).

Replay: ``python test/chaos/harness.py --format F [--spark [--upgrade]] --seed S --steps N`` takes
the same steps with the same parameters, each step drawing from its own seed (S and the step's
number). Kill moments and races between a writer and our action are wall-clock, so a kill may land
elsewhere and a race go the other way; the parameters that depend on the table (rows to delete,
the snapshot to roll back to) then follow the table. A failure prints the exact command.
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
import history as h  # noqa: E402
from test_expire_iceberg import files_needed  # noqa: E402

PARTITIONS = 4
NAMESPACE = "chaos"
CATALOG = "chaos"  # the sqlite catalog's name, as pyiceberg, Spark's JDBC catalog and we name it
TABLE = "events"
WRITER = HERE / "writer.py"
CONFLICT = "commit conflict"
# Orphan removal's refusal when a commit landed while it listed the table's files (nothing deleted).
TABLE_MOVED = "the table changed while its files were listed"
# What the gate's `commit` column says of a partition re-planned after a conflict, and of one
# given up (partial progress).
RETRIED = "retried"
GAVE_UP = "conflict: gave up"
# The writers' operations, weighted by how often a run draws them. pyiceberg does not write v3
# tables: after the upgrade Spark writes alone. The history moves need Spark (Iceberg's
# procedures) or deltalake's restore, and a snapshot or version whose rows the model knows.
LIBRARY_WRITES = ["append"] * 5 + ["delete"] * 3 + ["overwrite"] * 2
SPARK_WRITES = ["spark_delete"] * 3 + ["spark_update"] * 2 + ["spark_merge"] * 2 + ["spark_append"] * 2 + [
    "spark_delete_partition"]
HISTORY_MOVES = ["spark_rollback"] * 2 + ["spark_set_current", "spark_cherrypick"]
# The formats Spark writes a v2 merge-on-read delete in (`write.delete.format.default`).
DELETE_FORMATS = ["parquet"] * 4 + ["avro", "orc"]
# What a reader says of delete files it cannot read (pyiceberg, DuckDB: Avro and ORC position
# deletes): that reader's check is skipped and counted, Spark's still runs.
UNREADABLE = ("Delete file format not supported", "not supported for deletes")
# With --upgrade, a table has this many steps after its upgrade to v3, then a new table is made
# (and upgraded in turn): a long run upgrades many tables.
TABLE_STEPS_AFTER_UPGRADE = 40


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
    """The rows the writers committed, by key; and the rows of every snapshot (Iceberg) or version
    (Delta) the model was seen equal to, by its id, so that a rollback restores that model."""

    rows: dict[int, tuple[int, str]] = field(default_factory=dict)
    next_id: int = 0
    at: dict[int, dict] = field(default_factory=dict)

    def fresh_rows(self, rng: random.Random, count: int, p: int | None = None) -> list[list]:
        out = []
        for _ in range(count):
            part = rng.randrange(PARTITIONS) if p is None else p
            out.append([self.next_id, part, f"v{self.next_id}-{rng.randrange(10**6)}"])
            self.next_id += 1
        return out

    def remember(self, head: int | None) -> None:
        """The table's head reads as the model (just checked)."""
        if head is not None:
            self.at[head] = dict(self.rows)

    def apply(self, op: dict) -> None:
        kind = op["op"]
        if kind in ("append", "spark_append", "spark_update", "spark_merge"):
            self.rows.update({r[0]: (r[1], r[2]) for r in op["rows"]})
        elif kind in ("delete", "spark_delete"):
            for key in op["ids"]:
                self.rows.pop(key, None)
        elif kind in ("overwrite", "spark_delete_partition"):
            self.rows = {k: v for k, v in self.rows.items() if v[0] != op["p"]}
            self.rows.update({r[0]: (r[1], r[2]) for r in op.get("rows", [])})
        elif kind in ("spark_rollback", "spark_set_current"):
            self.rows = dict(self.at[op["snapshot"]])
        elif kind == "restore":
            self.rows = dict(self.at[op["version"]])
        elif kind == "spark_cherrypick":  # an append's rows, added again on top of the head
            picked, parent = self.at[op["snapshot"]], self.at[op["parent"]]
            self.rows.update({k: v for k, v in picked.items() if k not in parent})

    def expected(self) -> list[tuple]:
        return sorted((k, p, v) for k, (p, v) in self.rows.items())


# --------------------------------------------------------------------------- the two table kinds


class IcebergSubject:
    """An Iceberg table (v1 or v2) on a sqlite SQL catalog; pyiceberg writes and reads it."""

    format = "iceberg"
    actions = ("compact", "compact", "gate", "expire", "rewrite_manifests", "rewrite_position_deletes", "orphans")

    def __init__(self, root: Path, rng: random.Random, spark: bool, upgrade: bool = False, table: str = TABLE):
        from pyiceberg.catalog.sql import SqlCatalog
        from pyiceberg.partitioning import PartitionField, PartitionSpec
        from pyiceberg.schema import Schema
        from pyiceberg.transforms import IdentityTransform
        from pyiceberg.types import IntegerType, LongType, NestedField, StringType

        root.mkdir(parents=True, exist_ok=True)
        self.uri = f"sqlite:///{root}/catalog.db"
        self.warehouse = f"file://{root}/warehouse"
        self.name = f"{NAMESPACE}.{table}"
        if spark:
            # Spark's JDBC pool keeps a read transaction open between statements; in WAL mode
            # that does not lock the other writers out (they would wait, then fail "locked").
            import sqlite3

            with sqlite3.connect(root / "catalog.db") as db:
                db.execute("PRAGMA journal_mode=WAL")
        self.catalog = SqlCatalog(CATALOG, uri=self.uri, warehouse=self.warehouse)
        self.catalog.create_namespace_if_not_exists(NAMESPACE)
        schema = Schema(NestedField(1, "id", LongType()), NestedField(2, "p", IntegerType()),
                        NestedField(3, "val", StringType()))
        spec = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="p"))
        self.version = 2 if spark else rng.choice([1, 2])  # Spark's merge-on-read needs v2
        self.root = root
        # Spark deletes, updates and merges merge-on-read (pyiceberg warns and stays copy-on-write).
        modes = ("delete", "update", "merge") if spark else ()
        merge_on_read = {f"write.{kind}.mode": "merge-on-read" for kind in modes}
        self.catalog.create_table(self.name, schema, partition_spec=spec,
                                  properties={"format-version": str(self.version), **merge_on_read})
        self.spec_evolved = False
        self.upgrade_at = rng.randint(4, 16) if upgrade else None  # the step that upgrades it to v3
        self.spark: SparkWriter | None = None  # the reference reader too, when the run has Spark
        self.commits: dict[int, h.Commit] = {}  # every snapshot any metadata file read showed
        self.metadata_read: set[str] = set()

    def describe(self) -> str:
        upgrade = ", upgraded to v3 mid-run" if self.upgrade_at is not None else ""
        return f"Iceberg v{self.version}{upgrade} on a sqlite catalog"

    def writer_fields(self) -> dict:
        return {"format": "iceberg", "catalog_uri": self.uri, "warehouse": self.warehouse, "table": self.name,
                "catalog": CATALOG}

    def writer_kinds(self, add_column: bool) -> list[str]:
        if self.version >= 3:
            kinds = SPARK_WRITES * 2
        else:
            kinds = library_writes(add_column) + ([] if self.spec_evolved else ["evolve_spec"])
            kinds += SPARK_WRITES if self.spark else []
        return kinds + (HISTORY_MOVES if self.spark else [])

    def upgrade_due(self, steps: int) -> bool:
        """Whether the table, `steps` old, is to be upgraded to v3 now."""
        return self.upgrade_at is not None and self.version < 3 and steps >= self.upgrade_at

    def evolved(self, op: dict) -> None:
        if op["op"] == "evolve_spec":
            self.spec_evolved = True
        elif op["op"] == "spark_upgrade":
            self.version = 3

    def history_op(self, kind: str, rng: random.Random, model: Model) -> dict | None:
        """A rollback to one of the head's three last ancestors, a set-current to any snapshot,
        or a cherry-pick of an append that is no ancestor of the head; of snapshots whose rows the
        model knows (None when there is none)."""
        table = self.table()
        snapshots = sorted(table.metadata.snapshots, key=lambda s: (s.sequence_number or 0, s.timestamp_ms))
        head = table.metadata.current_snapshot_id
        ancestry = ancestors(table.metadata, head)
        if kind == "spark_rollback":
            candidates = [s for s in ancestry[1:4] if s in model.at]
        elif kind == "spark_set_current":
            candidates = [s.snapshot_id for s in snapshots if s.snapshot_id != head and s.snapshot_id in model.at]
        else:
            candidates = [s.snapshot_id for s in snapshots if s.snapshot_id not in ancestry
                          and s.summary is not None and s.summary.operation.value == "append"
                          and s.snapshot_id in model.at and s.parent_snapshot_id in model.at]
        if not candidates:
            return None
        target = rng.choice(candidates)
        op = {"snapshot": target}
        if kind == "spark_cherrypick":
            op["parent"] = table.metadata.snapshot_by_id(target).parent_snapshot_id
        return op

    def target(self) -> str:
        return f"'{self.name}', catalog := '{CATALOG}', catalog_uri := {sql_text(self.uri)}"

    def table(self):
        return self.catalog.load_table(self.name)

    def read_rows(self, snapshot: int | None = None) -> list[tuple]:
        arrow = self.table().scan(selected_fields=("id", "p", "val"), snapshot_id=snapshot).to_arrow()
        return sorted(zip(arrow["id"].to_pylist(), arrow["p"].to_pylist(), arrow["val"].to_pylist()))

    def observe(self, snapshot: int | None = None) -> tuple[str, list[tuple], h.Lineage | None]:
        """The rows (at `snapshot`, else the head) as the reference reads them — Spark when the run
        has it, with each row's lineage on v3 — else pyiceberg: (reader, rows, lineage or None)."""
        if self.spark is None:
            return "writer's library", self.read_rows(snapshot), None
        return ("Spark", *self.spark.read(self.name, snapshot, lineage=self.version >= 3))

    def other_readers(self, with_duckdb: bool) -> list:
        """The readers besides observe()'s: pyiceberg when Spark is the reference, DuckDB's
        iceberg extension every few steps."""
        out = [("writer's library", self.read_rows)] if self.spark is not None else []
        return out + ([("DuckDB", self.read_rows_duckdb)] if with_duckdb else [])

    def head(self) -> int | None:
        return self.table().metadata.current_snapshot_id

    def retained(self, snapshot: int) -> bool:
        return self.table().metadata.snapshot_by_id(snapshot) is not None

    def assigns_row_ids(self, snapshot: int | None) -> bool:
        """Whether the snapshot gives its rows ids (v3: its manifest list has a `first-row-id`)."""
        commit = self.commits.get(snapshot) if snapshot is not None else None
        return commit is not None and commit.row_ids

    def new_commits(self) -> list[h.Commit]:
        """Snapshots no earlier call saw, oldest first, from the current metadata file and those
        logged since (a snapshot a run both committed and expired is in the latter only)."""
        table = self.table()
        logged = [entry.metadata_file for entry in table.metadata.metadata_log]
        paths = [local_path(uri) for uri in logged + [table.metadata_location]]
        new = []
        for path in paths:
            if path in self.metadata_read or not os.path.exists(path):
                continue
            self.metadata_read.add(path)
            for commit in h.iceberg_commits(json.loads(Path(path).read_text())).values():
                if commit.id not in self.commits:
                    self.commits[commit.id] = commit
                    new.append(commit)
        return sorted(new, key=lambda commit: commit.order)

    def descends(self, commit: h.Commit, base: int | None) -> bool | None:
        return h.iceberg_descends(self.commits, commit, base)

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

    def __init__(self, root: Path, rng: random.Random, spark: bool, upgrade: bool = False, table: str = TABLE):
        from deltalake import write_deltalake

        import writer

        root.mkdir(parents=True, exist_ok=True)
        self.path = root / table
        schema = writer.pa.schema([("id", writer.pa.int64()), ("p", writer.pa.int32()), ("val", writer.pa.string())])
        write_deltalake(str(self.path), writer.rows_table([], schema), partition_by=["p"])
        self.safe_version = 0  # the table at every version from here on must be readable in full
        self.commits: dict[int, h.Commit] = {}  # every version the log showed

    def describe(self) -> str:
        return "Delta (deltalake, RESTORE too) on local disk"

    def writer_fields(self) -> dict:
        return {"format": "delta", "path": str(self.path)}

    def writer_kinds(self, add_column: bool) -> list[str]:
        return library_writes(add_column) + ["restore"] * 2

    def upgrade_due(self, steps: int) -> bool:
        return False

    def evolved(self, op: dict) -> None:
        pass

    def history_op(self, kind: str, rng: random.Random, model: Model) -> dict | None:
        """A restore to one of the four versions before the head whose rows the model knows and
        whose files no zero-retention VACUUM removed (None when there is none)."""
        head = self.current_version()
        candidates = [v for v in range(max(self.safe_version, head - 4), head) if v in model.at]
        return {"version": rng.choice(candidates)} if candidates else None

    def target(self) -> str:
        return sql_text(str(self.path))

    def current_version(self) -> int:
        from deltalake import DeltaTable

        return DeltaTable(str(self.path)).version()

    def read_rows(self, version: int | None = None) -> list[tuple]:
        from deltalake import DeltaTable

        import pyarrow as pa

        arrow = pa.table(DeltaTable(str(self.path), version=version).to_pyarrow_table(columns=["id", "p", "val"]))
        return sorted(zip(arrow["id"].to_pylist(), arrow["p"].to_pylist(), arrow["val"].to_pylist()))

    def observe(self, version: int | None = None) -> tuple[str, list[tuple], h.Lineage | None]:
        """The rows (at `version`, else the head) as deltalake reads them (no lineage)."""
        return "writer's library", self.read_rows(version), None

    def other_readers(self, with_duckdb: bool) -> list:
        return [("DuckDB", self.read_rows_duckdb)] if with_duckdb else []

    def head(self) -> int:
        return self.current_version()

    def retained(self, version: int) -> bool:
        return version >= self.safe_version

    def assigns_row_ids(self, version: int | None) -> bool:
        return False

    def new_commits(self) -> list[h.Commit]:
        """Versions no earlier call saw, oldest first."""
        start = max(self.commits, default=-1) + 1
        new = [h.delta_commit(self.path / "_delta_log", v) for v in range(start, self.current_version() + 1)]
        self.commits.update({commit.id: commit for commit in new if commit is not None})
        return [commit for commit in new if commit is not None]

    def descends(self, commit: h.Commit, base: int | None) -> bool | None:
        return h.delta_descends(self.commits, commit, base)

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


def library_writes(add_column: bool) -> list[str]:
    """The operations of writer.py's libraries (pyiceberg, deltalake), weighted."""
    return LIBRARY_WRITES + (["add_column"] if add_column else [])


def ancestors(metadata, head: int | None) -> list[int]:
    """The head and its ancestors that the metadata (pyiceberg's) still has, newest first."""
    out = []
    while head is not None and metadata.snapshot_by_id(head) is not None:
        out.append(head)
        head = metadata.snapshot_by_id(head).parent_snapshot_id
    return out


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
    if rng.random() < 0.5:  # a commit per batch of partitions (the gate's default), or one commit
        params["partial_progress"] = rng.random() < 0.7
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
    configuration: str = ""  # the harness's flags that make this kind of run (replay, report)
    tables: int = 0  # tables made (more than one with --upgrade)
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
    caught: str = ""  # the invariant a failed run broke

    def as_dict(self) -> dict:
        return {"format": self.format, "seed": self.seed, "table": self.table, "steps": self.steps,
                "seconds": round(self.seconds, 1), "writes": dict(self.writes), "actions": dict(self.actions),
                "kills": self.kills, "kill_attempts": self.kill_attempts, "concurrent_writes": self.concurrent,
                "conflicts": self.conflicts, "steps_with_delete_files": self.steps_with_delete_files,
                "checks": dict(self.checks), "configuration": self.configuration, "caught": self.caught,
                "tables": self.tables}


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
             str(scratch)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True, cwd=HERE)
        if self.receive().get("ready") is not True:
            raise ChaosFailure(f"Spark did not start (see {subject.root / 'spark.log'})")

    def send(self, op: dict) -> None:
        self.proc.stdin.write(json.dumps(op) + "\n")
        self.proc.stdin.flush()

    def read(self, table: str, snapshot: int | None, lineage: bool) -> tuple[list[tuple], h.Lineage | None]:
        """The rows Spark reads of `table` (at `snapshot`, else the head), and with `lineage` each
        row's (_row_id, _last_updated_sequence_number) by key."""
        self.send({"op": "spark_read", "table": table, "snapshot": snapshot, "lineage": lineage})
        outcome = self.receive()
        if not outcome.get("ok"):
            raise RuntimeError(f"Spark could not read the table: {outcome.get('error') or outcome.get('conflict')}")
        rows = sorted(tuple(r[:3]) for r in outcome["rows"])
        return rows, ({r[0]: (r[3], r[4]) for r in outcome["rows"]} if lineage else None)

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


# The invariants, as the checks counter and a failed run's `caught` name them.
ROWS = "rows = model"
FILES = "referenced files exist"
CLEAN = "nothing unreferenced after cleanup"
CARRIES = "our commit reads as its parent"
LINEAGE = "row lineage kept by our actions"
DESCENDS = "our commit descends from what it read"
UNIQUE = "row ids unique (v3)"


@dataclass
class Done:
    """One of our actions as a step ran it, for the checks of the commits it made."""

    name: str
    text: str  # what it printed, lowercased
    start_head: int | None  # the snapshot (Iceberg) or version (Delta) current when it started
    alone: bool  # no writer ran beside it: every change of the step is its own

    def planned_on_start(self, commit: h.Commit) -> bool:
        """Whether `commit` must descend from `start_head`: a compaction's, which rewrites the files
        it read then (Java's rule), unless the action re-planned a partition after a conflict. The
        gate's later steps read the table again, and a manifest or position-delete rewrite may
        plan again on a moved head: their commits must read as their parent (check_commit)."""
        return commit.compaction and RETRIED not in self.text and GAVE_UP not in self.text


def configuration(fmt: str, spark: bool, upgrade: bool) -> str:
    """The harness's flags for this kind of run."""
    return f"--format {fmt}" + (" --spark" if spark else "") + (" --upgrade" if upgrade else "")


def as_rows(rows: dict) -> list[tuple]:
    return sorted((k, p, v) for k, (p, v) in rows.items())


class Run:
    def __init__(self, fmt: str, seed: int, root: Path, extension: Path, spark: bool = False,
                 upgrade: bool = False):
        self.rng = random.Random(seed)
        self.seed = seed
        self.fmt = fmt
        self.extension = extension
        self.cli = duckdb_cli()
        self.root, self.spark_wanted, self.upgrade = root, spark, upgrade
        self.summary = Summary(fmt, seed, configuration=configuration(fmt, spark, upgrade))
        self.trail: list[str] = []
        self.durations: dict[str, float] = collections.defaultdict(lambda: 1.0)
        self.spark: SparkWriter | None = None
        self.new_table()
        self.summary.table = self.subject.describe() + (", Spark writing too" if spark else "")
        self.spark = SparkWriter(self.subject) if spark else None
        self.subject.spark = self.spark

    def new_table(self) -> None:
        """A fresh table and model: the run's first, and with --upgrade one more after each table
        had TABLE_STEPS_AFTER_UPGRADE steps on v3 (the steps right after an upgrade are the ones
        an upgrade can break)."""
        name = TABLE if not self.summary.tables else f"{TABLE}_{self.summary.tables}"
        self.subject = SUBJECTS[self.fmt](self.root, self.rng, self.spark_wanted, self.upgrade, table=name)
        self.subject.spark = self.spark
        self.summary.tables += 1
        self.born = self.summary.steps  # the step the table was made at
        self.upgraded: int | None = None  # the step its upgrade to v3 committed at
        self.model = Model()
        self.columns_added = 0
        self.done: Done | None = None  # the step's action, for check()
        self.last_head: int | None = None  # the head at the last check, and its rows' lineage
        self.last_lineage: h.Lineage | None = None
        self.lineage_at: dict[int, h.Lineage | None] = {}  # the last head's and this step's commits'

    def close(self) -> None:
        if self.spark is not None:
            self.spark.close()

    # ---- failures

    def fail(self, message: str, invariant: str = "") -> None:
        """Stop the run: the broken invariant (none: an unexpected error), the trail, the replay."""
        self.summary.caught = invariant or "unexpected error"
        trail = "\n  ".join(self.trail[-12:])
        raise ChaosFailure(f"chaos {self.fmt} seed={self.seed} step={self.summary.steps}: "
                           f"[{self.summary.caught}] {message}\n  last steps:\n  {trail}\n"
                           f"  replay: LAKEHOUSE_EXTENSION={self.extension} python test/chaos/harness.py "
                           f"{self.summary.configuration} --seed {self.seed} --steps {self.summary.steps}")

    # ---- writers

    def writer_op(self) -> dict:
        """A random writer operation (the upgrade to v3 at its step), with its parameters."""
        rng = self.rng
        fields = self.subject.writer_fields()
        if self.subject.upgrade_due(self.summary.steps - self.born):
            return {**fields, "op": "spark_upgrade"}
        kinds = self.subject.writer_kinds(self.columns_added < 2)
        kind = rng.choice(kinds)
        append = "append" if "append" in kinds else "spark_append"
        if kind in HISTORY_MOVES or kind == "restore":
            moved = self.subject.history_op(kind, rng, self.model)
            if moved is not None:
                return {**fields, "op": kind, **moved}
            kind = append  # nothing to move to yet
        if kind in ("delete", "overwrite", "spark_delete", "spark_update") and not self.model.rows:
            kind = append
        return self.with_parameters({**fields, "op": kind}, rng)

    def with_parameters(self, op: dict, rng: random.Random) -> dict:
        """`op` with its rows, keys, partition or column drawn against the model."""
        kind = op["op"]
        if kind in ("spark_delete", "spark_update", "spark_merge") and self.subject.version < 3:
            op["delete_format"] = rng.choice(DELETE_FORMATS)
        if kind in ("append", "spark_append"):
            op["rows"] = self.model.fresh_rows(rng, rng.randint(1, 40))
        elif kind == "spark_delete_partition":
            op["p"] = rng.randrange(PARTITIONS)
        elif kind in ("delete", "spark_delete"):
            keys = sorted(self.model.rows)
            op["ids"] = rng.sample(keys, min(len(keys), rng.randint(1, 12)))
        elif kind in ("spark_update", "spark_merge"):
            keys = sorted(self.model.rows)
            changed = rng.sample(keys, min(len(keys), rng.randint(0 if kind == "spark_merge" else 1, 8)))
            op["rows"] = [[k, self.model.rows[k][0], f"u{k}-{rng.randrange(10**6)}"] for k in changed]
            if kind == "spark_merge":  # at least one row: MERGE needs a source
                op["rows"] += self.model.fresh_rows(rng, rng.randint(0 if op["rows"] else 1, 8))
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
            if op["op"] == "spark_upgrade":
                self.upgraded = self.summary.steps
            self.summary.writes[op["op"]] += 1
            target = {k: op[k] for k in ("snapshot", "version", "p") if k in op}
            self.trail.append(f"{label}: committed" + (f" {json.dumps(target)}" if target else ""))
        elif "unsupported" in outcome:  # the library cannot do it on this table: nothing committed
            self.summary.writes[op["op"] + " (unsupported by the library)"] += 1
            self.trail.append(f"{label}: unsupported ({outcome['unsupported'][:120]})")
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

    def finish_action(self, name: str, sql: str, proc: subprocess.Popen, started: float, killed: bool,
                      alone: bool) -> None:
        """The action's outcome counted and put on the trail, and kept for check() (`self.done`)."""
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
        elif CONFLICT in text or TABLE_MOVED in text:
            outcome = "conflict"
            self.summary.conflicts += 1
        else:
            self.fail(f"{name} failed (exit {proc.returncode}): {(err or out).strip()[-2000:]}\n  sql: {sql}")
        if "panic" in text:
            self.fail(f"{name} panicked: {text[-2000:]}")
        self.summary.actions[f"{name}: {outcome}"] += 1
        self.trail.append(f"{name} [{elapsed:.1f}s] {outcome}: {sql}")
        self.done = Done(name, text, self.last_head, alone)

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
        self.finish_action(name, sql, proc, started, killed, alone=writer is None)
        if writer is not None:
            self.finish_writer(op, writer)

    def cleanup(self) -> None:
        """Orphan removal / VACUUM with no age on a quiesced table, then nothing unreferenced may
        remain under the table's location (Delta: outside ``_delta_log``)."""
        sql = self.subject.cleanup_sql()
        started = time.monotonic()
        self.finish_action("cleanup", sql, self.start_action(sql, 0), started, killed=False, alone=True)
        self.subject.after_cleanup()
        referenced = self.subject.referenced()
        root = self.subject.location()
        # Hidden files (Hadoop's `.x.parquet.crc` checksums beside Spark's files) are the known
        # leftovers: orphan removal never deletes them, as Java's does not (its hidden-path filter).
        left = sorted(str(p) for p in root.rglob("*")
                      if p.is_file() and "_delta_log" not in p.parts and not p.name.startswith(".")
                      and str(p) not in referenced)
        self.summary.checks[CLEAN] += 1
        if left:
            self.fail(f"{len(left)} unreferenced files after a zero-age cleanup: {left[:8]}", CLEAN)

    # ---- invariants

    def check(self, with_duckdb: bool) -> None:
        """Every invariant on the table as the step left it (see the module's docstring)."""
        done, self.done = self.done, None
        head = self.subject.head()
        # Our commits first: when one loses rows, its own check says which commit and why.
        self.lineage_at = {self.last_head: self.last_lineage} if self.last_head is not None else {}
        for commit in self.subject.new_commits():
            if commit.ours:
                self.check_commit(commit, done)
        try:
            reader, rows, lineage = self.subject.observe()
        except Exception as error:  # noqa: BLE001 - an unreadable table is the finding
            self.fail(f"the table cannot be read: {type(error).__name__}: {error}", f"{ROWS} ({self.reference()})")
        self.compare(reader, rows)
        for name, read in self.subject.other_readers(with_duckdb):
            self.compare_other(name, read)
        if self.subject.delete_files():
            self.summary.steps_with_delete_files += 1
        missing = sorted(p for p in self.subject.live_referenced() if not os.path.exists(p))
        self.summary.checks[FILES] += 1
        if missing:
            self.fail(f"{len(missing)} referenced files are missing: {missing[:8]}", FILES)
        if lineage is not None:
            self.check_row_ids(head, lineage, done)
        self.model.remember(head)
        self.last_head, self.last_lineage = head, lineage

    def reference(self) -> str:
        return "Spark" if self.spark is not None else "writer's library"

    def compare(self, reader: str, rows: list[tuple]) -> None:
        """`rows` as `reader` read them must be the model's."""
        name = f"{ROWS} ({reader})"
        self.summary.checks[name] += 1
        if rows != self.model.expected():
            self.fail(diff(reader, rows, self.model.expected()), name)

    def compare_other(self, reader: str, read) -> None:
        """compare() with another reader, skipped (and counted) when it cannot read the table's
        delete files (pyiceberg and DuckDB: Avro and ORC position deletes)."""
        try:
            rows = read()
        except Exception as error:  # noqa: BLE001 - classified here
            if any(text in str(error) for text in UNREADABLE):
                self.summary.checks[f"{ROWS} ({reader}): skipped, delete files it cannot read"] += 1
                return
            self.fail(f"{reader} cannot read the table: {type(error).__name__}: {error}", f"{ROWS} ({reader})")
        self.compare(reader, rows)

    def check_commit(self, commit: h.Commit, done: Done | None) -> None:
        """One commit of ours: it descends from the head its action read when it was planned on
        that, reads as its parent, and keeps its parent's row lineage."""
        if done is not None and done.planned_on_start(commit):
            self.check_descends(commit, done)
        try:
            parent = self.state_of(commit.parent)
            retained = parent is not None and self.subject.retained(commit.id)
            _, rows, lineage = self.subject.observe(commit.id) if retained else (None, None, None)
        except Exception as error:  # noqa: BLE001 - an unreadable snapshot is the finding
            self.fail(f"our {commit.operation} {commit.id} or its parent cannot be read: {error}", CARRIES)
        if not retained:
            self.summary.checks[f"{CARRIES}: not checked, expired before the check"] += 1
        else:
            self.summary.checks[CARRIES] += 1
            if rows != parent[0]:
                self.fail(f"our {commit.operation} {commit.id} on top of {commit.parent}: "
                          + diff(f"{commit.id}", rows, parent[0], of=f"its parent {commit.parent}"), CARRIES)
            self.lineage_at[commit.id] = lineage
            if commit.parent in self.model.at:
                self.model.at[commit.id] = self.model.at[commit.parent]
            if lineage is not None and parent[1] is not None:
                self.check_lineage_kept(parent[1], lineage, f"our {commit.operation} {commit.id} on {commit.parent}")

    def state_of(self, snapshot: int | None) -> tuple[list[tuple], h.Lineage | None] | None:
        """The rows (and lineage) of a snapshot or version: the model's when it was seen equal to
        it, else as read now; None when it is gone."""
        if snapshot is None:
            return None
        known = self.model.at.get(snapshot)
        if known is not None and (snapshot in self.lineage_at or self.spark is None):
            return as_rows(known), self.lineage_at.get(snapshot)
        if not self.subject.retained(snapshot):
            return None
        _, rows, lineage = self.subject.observe(snapshot)
        self.lineage_at[snapshot] = lineage
        return rows, lineage

    def check_descends(self, commit: h.Commit, done: Done) -> None:
        verdict = self.subject.descends(commit, done.start_head)
        if verdict is None:
            self.summary.checks[f"{DESCENDS}: undetermined, history expired"] += 1
            return
        self.summary.checks[DESCENDS] += 1
        if not verdict:
            self.fail(f"{done.name} read {done.start_head} and committed {commit.id} on a history that moved back "
                      "(a rollback or RESTORE) in between: that commit must have been a conflict", DESCENDS)

    def check_lineage_kept(self, before: h.Lineage, after: h.Lineage, what: str) -> None:
        self.summary.checks[LINEAGE] += 1
        broken, tolerated = h.lineage_breaks(before, after)
        if tolerated:
            self.summary.checks[f"{LINEAGE}: rows let pass (Spark's file-sequence inheritance)"] += tolerated
        if broken:
            self.fail(f"{what}: rows changed (_row_id, _last_updated_sequence_number), e.g. {broken}", LINEAGE)

    def check_row_ids(self, head: int | None, lineage: h.Lineage, done: Done | None) -> None:
        """v3: live rows' ids are unique, and every row has one once the head assigns them; an
        action of ours that ran alone left every row's lineage as it was."""
        self.summary.checks[UNIQUE] += 1
        shared = h.duplicate_row_ids(lineage)
        if shared:
            self.fail(f"rows share a _row_id: {shared}", UNIQUE)
        without = h.rows_without_id(lineage) if self.subject.assigns_row_ids(head) else []
        if without:
            self.fail(f"rows without a _row_id at a snapshot that assigns them: {without}", UNIQUE)
        if done is not None and done.alone and self.last_lineage is not None:
            self.check_lineage_kept(self.last_lineage, lineage, f"{done.name} (alone)")

    # ---- the loop

    def step(self) -> None:
        # Each step draws from its own seed: a step that went another way in a replay (a kill that
        # landed elsewhere, a race lost) changes the table, not the later steps' draws.
        self.rng.seed(f"{self.seed}/{self.summary.steps}")
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
        self.fill()
        while True:
            if steps is not None and self.summary.steps >= steps:
                break
            if seconds is not None and time.monotonic() - started >= seconds:
                break
            if self.upgraded is not None and self.summary.steps - self.upgraded >= TABLE_STEPS_AFTER_UPGRADE:
                self.finish_table()
                self.new_table()
                self.fill()
            self.step()
        self.finish_table()
        self.summary.seconds = time.monotonic() - started
        return self.summary

    def fill(self) -> None:
        """A new table with something in it: three writes, checked."""
        for _ in range(3):
            op = self.writer_op() if self.model.rows else {**self.subject.writer_fields(), "op": "append",
                                                          "rows": self.model.fresh_rows(self.rng, 30)}
            self.finish_writer(op, self.start_writer(op))
        self.check(with_duckdb=False)

    def finish_table(self) -> None:
        """The last checks of a table: a zero-age cleanup, every reader."""
        self.cleanup()
        self.check(with_duckdb=True)


def diff(reader: str, rows: list[tuple], expected: list[tuple], of: str = "the model") -> str:
    """What `reader` read that `of` (the model, a parent snapshot) does not have, and the reverse."""
    got, want = collections.Counter(rows), collections.Counter(expected)
    extra, lost = got - want, want - got
    return (f"{reader} reads {len(rows)} rows, {of} has {len(expected)}: "
            f"{sum(extra.values())} extra (resurrected or duplicated) e.g. {sorted(extra)[:5]}, "
            f"{sum(lost.values())} lost e.g. {sorted(lost)[:5]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--format", choices=sorted(SUBJECTS), action="append")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--seconds", type=float, default=None, help="per format (default 60 unless --steps)")
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--spark", action="store_true",
                        help="Iceberg: Spark writes merge-on-read too, moves the history, is the reference reader")
    parser.add_argument("--upgrade", action="store_true", help="Iceberg with --spark: upgraded from v2 to v3 mid-run")
    parser.add_argument("--root", type=Path, default=None, help="where the tables go (default: a temp dir)")
    parser.add_argument("--json", type=Path, default=None, help="append each run's summary here, a line each")
    parser.add_argument("--label", default="", help="recorded with each summary (e.g. which build ran)")
    args = parser.parse_args(argv)
    import tempfile

    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(10**9)
    seconds = args.seconds if args.seconds is not None or args.steps is not None else 60.0
    extension = c.lakehouse_extension_path()
    root = args.root or Path(tempfile.mkdtemp(prefix="lakehouse-chaos-"))
    failed = False
    for fmt in args.format or sorted(SUBJECTS):
        spark = args.spark and fmt == "iceberg"
        run = Run(fmt, seed, root / f"{fmt}-{seed}", extension, spark=spark, upgrade=spark and args.upgrade)
        when = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
        host = f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}"
        failure = ""
        try:
            summary = run.run(seconds, args.steps)
        except ChaosFailure as error:
            print(error, file=sys.stderr)
            summary, failure = run.summary, str(error).splitlines()[0]
        failed = failed or bool(failure)
        record = {**summary.as_dict(), "when": when, "host": host, "failed": bool(failure), "failure": failure,
                  "label": args.label}
        print(json.dumps(record))
        if args.json:
            with args.json.open("a") as out:
                out.write(json.dumps(record) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
