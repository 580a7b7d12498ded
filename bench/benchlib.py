"""What the compaction benchmarks share (bench_compact.py, bench_compact_memory.py, bench_zamboni.py).

Only the standard library is imported at module level: bench_zamboni.py's children import this
module in iceberg-zamboni's own virtual environment as well as in the project's ``.venv``. DuckDB,
pyiceberg and pyarrow are imported inside the functions that use them.

The scripts import it as ``benchlib`` with ``bench/`` on ``sys.path`` (they put it there; a script
run by path, as the parent re-invokes them with ``--child``, has its own directory there anyway).
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterable

REPO_ROOT = Path(__file__).resolve().parent.parent
MIB = 1024 * 1024
GIB = 1024 * MIB


# --------------------------------------------------------------------------- small helpers


def extension_path(explicit: str | None) -> Path:
    """The lakehouse extension to benchmark: --extension, $LAKEHOUSE_EXTENSION, or the release build."""
    if explicit or os.environ.get("LAKEHOUSE_EXTENSION"):
        path = Path(explicit or os.environ["LAKEHOUSE_EXTENSION"])
        return path if path.is_absolute() else REPO_ROOT / path
    return REPO_ROOT / "build" / "release" / "lakehouse.duckdb_extension"


def fresh_dir(path: str | Path) -> Path:
    """`path` emptied (removed if there, created): a benchmark's work directory."""
    import shutil

    directory = Path(path)
    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    return directory


def quote(text: str) -> str:
    """A SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def quote_list(paths: Iterable[str]) -> str:
    """A DuckDB list of string literals, e.g. for ``read_parquet([...])``."""
    return "[" + ", ".join(quote(p) for p in paths) + "]"


def proc_status_kib(key: str, pid: int | str = "self") -> int:
    """A ``VmHWM``/``VmRSS``-style line of /proc/<pid>/status (this process by default), in KiB."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def thread_cpu() -> dict[int, tuple[str, float]]:
    """CPU seconds (user + system) so far of each thread of this process, by thread id, with its
    name (``comm``); the main thread's id is the process id."""
    ticks = os.sysconf("SC_CLK_TCK")
    out = {}
    for task in Path("/proc/self/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except OSError:
            continue
        # comm is in parentheses and may hold spaces: the fields after it are space-separated.
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        out[int(task.name)] = (name, (int(fields[11]) + int(fields[12])) / ticks)
    return out


def busiest_threads(before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]], top: int = 3) -> list[str]:
    """The threads that used the most CPU between two :func:`thread_cpu` snapshots, as
    ``name[main]: seconds`` (``main``: the process's own thread, DuckDB's client thread here)."""
    used = []
    for tid, (name, seconds) in after.items():
        spent = seconds - before.get(tid, (name, 0.0))[1]
        label = f"{name}[main]" if tid == os.getpid() else name
        used.append((spent, f"{label}: {spent:.1f} s"))
    return [text for _, text in sorted(used, reverse=True)[:top]]


def size_spread(sizes: list[int], target_bytes: int | None = None, tolerance: float = 0.25) -> dict[str, Any]:
    """Count, min / median / max and total MiB of file sizes; with ``target_bytes`` also how many
    (and which share) lie within ±``tolerance`` of it."""
    if not sizes:
        return {"count": 0}
    spread: dict[str, Any] = {"count": len(sizes)}
    if target_bytes is not None:
        lo, hi = target_bytes * (1 - tolerance), target_bytes * (1 + tolerance)
        on_target = sum(1 for s in sizes if lo <= s <= hi)
        spread.update(on_target=on_target, on_target_share=on_target / len(sizes))
    spread.update(
        min_mib=min(sizes) / MIB,
        median_mib=statistics.median(sizes) / MIB,
        max_mib=max(sizes) / MIB,
        total_mib=sum(sizes) / MIB,
    )
    return spread


def fmt_spread(spread: dict[str, Any], total: bool = False) -> str:
    """``N files, min / median / max MiB`` (and the total in parentheses), or ``–`` for none."""
    if not spread.get("count"):
        return "–"
    text = f"{spread['count']} files, {spread['min_mib']:.1f} / {spread['median_mib']:.1f} / {spread['max_mib']:.1f} MiB"
    return text + (f" ({spread['total_mib']:,.1f} MiB)" if total else "")


def machine(ram: bool = False) -> str:
    """The machine line of a report: architecture, CPUs (and RAM), Python version."""
    memory = f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / GIB:.0f} GiB RAM, " if ram else ""
    return f"{platform.machine()}, {os.cpu_count()} CPUs, {memory}Python {platform.python_version()}"


# --------------------------------------------------------------------------- DuckDB


def lakehouse_connection(extension: str | Path, *before_load: str) -> Any:
    """A fresh DuckDB connection that runs ``before_load`` (e.g. ``SET threads = 2``), then loads the extension."""
    import duckdb

    con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
    for statement in before_load:
        con.execute(statement)
    con.execute(f"LOAD {quote(str(extension))}")
    return con


def fetch_dicts(cursor: Any) -> list[dict[str, Any]]:
    """The rows of an executed DuckDB query, as dicts by column name."""
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, r)) for r in cursor.fetchall()]


def iceberg_connection() -> Any:
    """A DuckDB connection with DuckDB's own iceberg extension from its pip wheel loaded (never INSTALL)."""
    import glob
    import importlib.util

    import duckdb

    con = duckdb.connect()
    for name in ("avro", "iceberg"):
        spec = importlib.util.find_spec(f"duckdb_extension_{name}")
        found = [] if spec is None else sorted(
            f for loc in spec.submodule_search_locations for f in glob.glob(os.path.join(loc, "extensions", "*", f"{name}.duckdb_extension")))
        if not found:
            raise SystemExit(f"duckdb-extension-{name} is not installed in {sys.prefix} (make venv)")
        con.execute(f"LOAD {quote(found[-1])}")
    return con


# --------------------------------------------------------------------------- Iceberg tables (pyiceberg)


def catalog_uri(directory: Path) -> str:
    """The sqlite URI of the SQL catalog in ``directory``."""
    return f"sqlite:///{directory}/catalog.db"


def sql_catalog(name: str, directory: Path, warehouse: Path) -> Any:
    """pyiceberg's ``SqlCatalog`` ``name`` kept in ``directory``/catalog.db, new tables under ``warehouse``."""
    from pyiceberg.catalog.sql import SqlCatalog

    return SqlCatalog(name, uri=catalog_uri(directory), warehouse=f"file://{warehouse}")


def five_column_schema() -> Any:
    """``id BIGINT, partition_date DATE, value DOUBLE, payload VARCHAR, user_id INTEGER``, field ids 1…5."""
    from pyiceberg.schema import Schema
    from pyiceberg.types import DateType, DoubleType, IntegerType, LongType, NestedField, StringType

    return Schema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(2, "partition_date", DateType(), required=False),
        NestedField(3, "value", DoubleType(), required=False),
        NestedField(4, "payload", StringType(), required=False),
        NestedField(5, "user_id", IntegerType(), required=False),
    )


def identity_spec(column: str, source_id: int = 2) -> Any:
    """A partition spec of one identity field on column ``source_id``, named after the column."""
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.transforms import IdentityTransform

    return PartitionSpec(PartitionField(source_id=source_id, field_id=1000, transform=IdentityTransform(), name=column))


def register_files(catalog: Any, namespace: str, name: str, schema: Any, partition: str, location: Path,
                   files: list[str]) -> Any:
    """A new table ``namespace.name`` at ``location``, identity-partitioned on ``partition``,
    registering ``files`` (URIs) with ``add_files``; returns it as loaded afterwards."""
    catalog.create_namespace(namespace)
    table = catalog.create_table(f"{namespace}.{name}", schema=schema, partition_spec=identity_spec(partition),
                                 location=f"file://{location}")
    table.add_files(files)
    return catalog.load_table(f"{namespace}.{name}")


def scale_table(root: Path, manifests: int, entries: Callable[[str, int], Iterable[tuple[str, int, int, int]]]) -> str:
    """A table ``scale.t`` (id long, d int, s string; identity on ``d``, format v2) in a sqlite
    catalog under ``root``, with one pyiceberg fast append whose producer writes ``manifests``
    manifests: manifest ``m`` holds the data files ``entries(location, m)`` gives as (path, d,
    record count, size in bytes). Only the metadata is written (a file that should exist is the
    caller's to write). Returns the metadata location."""
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat, ManifestEntry, ManifestEntryStatus, ManifestWriterV2
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.table.snapshots import Operation
    from pyiceberg.table.update.snapshot import _FastAppendFiles
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.typedef import Record
    from pyiceberg.types import IntegerType, LongType, NestedField, StringType

    root.mkdir(parents=True, exist_ok=True)
    catalog = sql_catalog("default", root, root)
    catalog.create_namespace("scale")
    schema = Schema(NestedField(1, "id", LongType()), NestedField(2, "d", IntegerType()), NestedField(3, "s", StringType()))
    spec = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="d"))
    table = catalog.create_table("scale.t", schema=schema, partition_spec=spec, properties={"format-version": "2"})
    location = table.location()

    class ManyManifests(_FastAppendFiles):
        def _manifests(self) -> list:
            out = []
            for m in range(manifests):
                with ManifestWriterV2(spec, self.schema(), self.new_manifest_output(), self._snapshot_id,
                                      self._compression) as writer:
                    for path, d, rows, size in entries(location, m):
                        writer.add(ManifestEntry.from_args(
                            status=ManifestEntryStatus.ADDED, snapshot_id=self._snapshot_id, sequence_number=None,
                            file_sequence_number=None,
                            data_file=DataFile.from_args(content=DataFileContent.DATA, file_path=path,
                                                         file_format=FileFormat.PARQUET, partition=Record(d),
                                                         record_count=rows, file_size_in_bytes=size, spec_id=0),
                        ))
                out.append(writer.to_manifest_file())
            return out

    with table.transaction() as tx:
        ManyManifests(operation=Operation.APPEND, transaction=tx, io=table.io).commit()
    return catalog.load_table("scale.t").metadata_location


def iceberg_files(table: Any, partition: str) -> list[dict[str, Any]]:
    """The table's live data files: path, size, rows, and the ``partition`` field's value as text."""
    out = []
    for row in table.inspect.files().select(["content", "file_path", "file_size_in_bytes", "partition", "record_count"]).to_pylist():
        if row["content"] != 0:
            continue
        value = row["partition"][partition]
        out.append({"path": row["file_path"], "size": row["file_size_in_bytes"], "rows": row["record_count"],
                    "partition": value.isoformat() if value is not None else "null"})
    return out


def per_partition_counts(files: list[dict[str, Any]]) -> dict[str, int]:
    """Files per partition, in partition order."""
    counts: dict[str, int] = {}
    for f in files:
        counts[f["partition"]] = counts.get(f["partition"], 0) + 1
    return dict(sorted(counts.items()))


def snapshot_operation(table: Any) -> str | None:
    """The operation of the table's current snapshot (``replace``, ``append``, …), if any."""
    snapshot = table.current_snapshot()
    return str(snapshot.summary.operation.value) if snapshot and snapshot.summary else None


# --------------------------------------------------------------------------- parent


def selected_methods(spec: str, known: list[str], extension: Path) -> list[str]:
    """The methods of ``--methods`` (comma-separated); exits on an unknown one, or when a lakehouse
    method is asked for and the extension file is missing."""
    methods = [m.strip() for m in spec.split(",") if m.strip()]
    if unknown := set(methods) - set(known):
        raise SystemExit(f"unknown methods: {sorted(unknown)}")
    if any(m.startswith("lakehouse") for m in methods) and not extension.is_file():
        raise SystemExit(f"lakehouse extension {extension} does not exist: build it first (make)")
    return methods


def child_env(**extra: str) -> dict[str, str]:
    """The environment of a child process: ours, with ``RUST_LOG=error`` unless it is set, plus ``extra``."""
    return dict(os.environ, RUST_LOG=os.environ.get("RUST_LOG", "error"), **extra)


def stderr_tail(proc: subprocess.CompletedProcess, lines: int = 30) -> str:
    """The last lines a finished child wrote to stderr."""
    return "\n".join((proc.stderr or "").splitlines()[-lines:])


def run_phase(script: str, method: str, phase: str, workdir: Path, bench_dir: Path, extension: Path,
              extra: Iterable[str] = (), record_seconds: bool = False) -> dict[str, Any]:
    """Runs ``script --child <phase> --method <method> …`` in a process of its own and returns the
    ``<workdir>/<phase>.json`` it writes (with ``record_seconds``, plus the process's wall seconds
    as ``process_seconds``); a failed child raises, with the tail of its stderr."""
    command = [sys.executable, str(Path(script).resolve()), "--child", phase, "--method", method,
               "--workdir", str(workdir), "--dir", str(bench_dir), "--extension", str(extension), *extra]
    started = time.perf_counter()
    proc = subprocess.run(command, env=child_env(), capture_output=True, text=True)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"{method} {phase} failed (exit {proc.returncode}):\n{stderr_tail(proc)}")
    out = json.loads((workdir / f"{phase}.json").read_text())
    if record_seconds:
        out["process_seconds"] = wall
    return out


def run_methods(methods: list[str], repeat: int, bench_dir: Path, keep: bool,
                phase: Callable[[str, str, Path, int], dict[str, Any]],
                progress: Callable[[str, dict[str, Any], dict[str, Any]], str]) -> dict[str, list[dict[str, Any]]]:
    """Every method ``repeat`` times, each time in a fresh ``<bench_dir>/runs/<method>`` (removed
    afterwards unless ``keep``): ``phase(method, "setup" | "run" | "validate", workdir, attempt)``
    (a process of its own each), with ``sync`` before the timed run so that nothing of the setup is
    written back during the timing. After each phase ``progress(phase, its result, the setup's)``
    is printed. Returns each method's runs: ``{"setup": …, "run": …, "validate": …}``."""
    results: dict[str, list[dict[str, Any]]] = {m: [] for m in methods}
    for attempt in range(1, repeat + 1):
        for method in methods:
            workdir = bench_dir / "runs" / method
            shutil.rmtree(workdir, ignore_errors=True)
            workdir.mkdir(parents=True)
            print(f"[{attempt}/{repeat}] {method}: setup …", flush=True)
            setup = phase(method, "setup", workdir, attempt)
            print(progress("setup", setup, setup), flush=True)
            os.sync()
            time.sleep(1)
            run = phase(method, "run", workdir, attempt)
            print(progress("run", run, setup), flush=True)
            checked = phase(method, "validate", workdir, attempt)
            print(progress("validate", checked, setup), flush=True)
            results[method].append({"setup": setup, "run": run, "validate": checked})
            if not keep:
                shutil.rmtree(workdir, ignore_errors=True)
    return results


# --------------------------------------------------------------------------- markdown


def compact_result_table(rows: list[dict[str, Any]]) -> list[str]:
    """The rows ``lakehouse_compact`` returned, as a markdown table."""
    lines = ["| partition | verdict | files before → after | input files | output files | MiB rewritten |",
             "|---|---|---:|---:|---:|---:|"]
    for row in rows:
        lines.append(f"| {row['partition']} | {row['verdict']} | {row['files_before']} → {row['files_after']} | {row['input_files']} | "
                     f"{row['output_files']} | {(row['bytes_rewritten'] or 0) / MIB:,.1f} |")
    return lines


def write_report(markdown: str, output: str | Path, results: Path, payload: dict[str, Any]) -> None:
    """Prints the report, writes it to ``output`` and the raw results (JSON) to ``results``."""
    print()
    print(markdown)
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(markdown)
    results.write_text(json.dumps(payload, indent=2, default=str))
    print(f"written to {output}")
