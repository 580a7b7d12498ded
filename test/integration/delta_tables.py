"""Delta Lake tables for test_delta.py: builders, and the independent readers every figure and row
is checked against.

Writers we did not write build every table:

* deltalake (delta-rs) 1.6.6 ``write_deltalake``: fragmented tables in many small appends,
  partitioned by a string column whose values need escaping (space, ``/``, ``%``, ``=``, an
  emoji, NULL), an int and a date column; an unpartitioned one; deletes (copy-on-write);
* Apache Spark 4.0.1 + Delta Lake 4.0.0 (the session of ``spark.py``): tables written in many
  small INSERTs (with a checkpoint), deletion vectors (``delta.enableDeletionVectors`` + DELETE),
  column mapping (``delta.columnMapping.mode = name`` + a rename).

Readers we did not write check them:

* rows: deltalake (``QueryBuilder`` — its ``to_pyarrow_table`` refuses deletion vectors — or
  ``to_pyarrow_table``), DuckDB's delta extension (``delta_scan``, the pip wheel, LOADed, never
  INSTALLed), polars ``read_delta``, Spark;
* live files: deltalake ``get_add_actions``, DuckDB ``delta_list_files``, Spark's own snapshot
  (``DeltaLog.forTable(…).unsafeVolatileSnapshot().allFiles``: paths, raw partition value
  strings, sizes, stats, deletion vectors) and ``DESCRIBE DETAIL``;
* vacuum: deltalake ``DeltaTable.vacuum(dry_run=True, full=True)`` and Spark ``VACUUM … DRY RUN``,
  each on its own twin copy of the table (Delta paths are relative, so a copied directory is an
  independent table).

Vacuum scenarios are aged, not waited for: ``backdate_removes`` moves the ``deletionTimestamp`` of
chosen commits' remove actions into the past (in the JSON commit, dropping Hadoop's ``.crc`` of
it, which would no longer match), and ``age_files`` sets file modification times.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import os
import re
import shutil
import time
import urllib.parse
from collections import Counter, defaultdict
from decimal import Decimal
from pathlib import Path
from typing import Any, Iterable, Mapping

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable, QueryBuilder, write_deltalake

import conftest as c

MIB = 1024 * 1024
HOUR_S = 3600
DAY_S = 86_400
# Long enough ago that the 7-day default retention has passed, whatever the test's run time.
AGED_DAYS = 30
# The fragmented tables' small-file threshold: their appends write 1-3 KiB files, their bulk
# loads ~0.3 MiB ones.
SMALL_MB = 0.1
HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
UNPARTITIONED = "(unpartitioned)"

# The integer figures of a lakehouse_fragmentation row compared one-to-one with the references.
FIGURES = ("total_files", "small_files", "total_size_bytes", "small_size_bytes", "record_count", "delete_files")


# --------------------------------------------------------------------------- partition labels

# Spark's ExternalCatalogUtils.escapePathName (Hive's FileUtils.escapePathName): what Delta's
# Spark writer escapes in partition directory names (on Linux; Windows adds ' ', '<', '>', '|').
_HIVE_ESCAPED = frozenset([chr(i) for i in range(0x01, 0x20)] + list('"#%\'*/:=?\\\x7f{[]^'))


def hive_escape(text: str) -> str:
    """``%XX`` (upper-case hex) for each character Hive escapes; everything else as it is."""
    return "".join(f"%{ord(ch):02X}" if ch in _HIVE_ESCAPED else ch for ch in text)


def partition_label(columns: Iterable[str], values: Mapping[str, str | None]) -> str:
    """The profile's label: ``col=value/…`` in partition column order, names and values escaped
    as Delta/Hive partition directories are, NULL as ``__HIVE_DEFAULT_PARTITION__``."""
    columns = list(columns)
    if not columns:
        return UNPARTITIONED
    parts = []
    for column in columns:
        value = values.get(column)
        parts.append(f"{hive_escape(column)}={HIVE_NULL if value is None else hive_escape(value)}")
    return "/".join(parts)


def spark_partition_label(spark: Any, columns: Iterable[str], values: Mapping[str, str | None]) -> str:
    """The same label built by Spark itself: ``ExternalCatalogUtils.getPartitionPathString`` (the
    function Delta's Spark writer names partition directories with) for each column."""
    columns = list(columns)
    if not columns:
        return UNPARTITIONED
    utils = spark._jvm.org.apache.spark.sql.catalyst.catalog.ExternalCatalogUtils
    return "/".join(utils.getPartitionPathString(column, values.get(column)) for column in columns)


def delta_string(value: Any) -> str | None:
    """A typed partition value (as deltalake returns it) in Delta's serialized form (the string
    the log's ``partitionValues`` holds)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, Decimal)):
        return str(value)
    if isinstance(value, dt.datetime):
        raise NotImplementedError("timestamp partition values are not used by these tests")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8")
    if isinstance(value, str):
        return value
    raise NotImplementedError(f"partition value {value!r}")


# --------------------------------------------------------------------------- live files


@dataclasses.dataclass(frozen=True)
class LiveFile:
    """One live data file as a reference reader reports it."""

    path: str  # absolute local path
    label: str  # partition label (see partition_label)
    size: int | None  # bytes (None: the reader does not say)
    records: int  # stats numRecords (0 when the file has no stats)
    has_dv: bool | None  # carries a deletion vector (None: the reader does not say)


def _abs(table: str | Path, relative: str) -> str:
    """Absolute local path of a log path (add/remove paths are URI-encoded, relative)."""
    if relative.startswith("file:"):
        return c.local_path(urllib.parse.unquote(relative)) if relative.startswith("file://") else urllib.parse.unquote(relative[5:])
    return os.path.normpath(os.path.join(str(table), urllib.parse.unquote(relative)))


def files_deltalake(path: str | Path) -> list[LiveFile]:
    """Live files per deltalake ``get_add_actions(flatten=True)`` (no deletion-vector column in
    1.6.6: ``has_dv`` is None)."""
    table = DeltaTable(str(path))
    columns = table.metadata().partition_columns
    actions = pa.table(table.get_add_actions(flatten=True)).to_pylist()
    out = []
    for a in actions:
        values = {col: delta_string(a[f"partition.{col}"]) for col in columns}
        out.append(LiveFile(_abs(path, a["path"]), partition_label(columns, values), a["size_bytes"], a["num_records"] or 0, None))
    return out


def files_duckdb(con: duckdb.DuckDBPyConnection, path: str | Path, columns: list[str]) -> list[LiveFile]:
    """Live files per DuckDB's ``delta_list_files`` (no sizes; ``cardinality`` is the stats'
    numRecords; ``have_deletes``: a deletion vector). ``columns``: partition column order."""
    rows = con.execute("SELECT data_file, cardinality, partitions, have_deletes FROM delta_list_files(?)", [str(path)]).fetchall()
    out = []
    for data_file, cardinality, partitions, have_deletes in rows:
        values = {k: _duckdb_partition_value(v) for k, v in (partitions or {}).items()}
        out.append(LiveFile(_abs(path, data_file), partition_label(columns, values), None, cardinality or 0, bool(have_deletes)))
    return out


def _duckdb_partition_value(value: str | None) -> str | None:
    """delta_list_files 1.5.5 prints a NULL partition value as the string 'NULL' (the tables
    here hold no such string) and binary values as a BLOB literal (``\\xF0\\x9F…``)."""
    if value is None or value == "NULL":
        return None
    if "\\x" in value:
        raw = re.sub(rb"\\x([0-9A-Fa-f]{2})", lambda m: bytes([int(m.group(1), 16)]), value.encode("utf-8"))
        return raw.decode("utf-8")
    return value


def spark_snapshot(spark: Any, path: str | Path) -> Any:
    """Spark's freshly loaded Delta snapshot of ``path`` (the JVM DeltaLog cache is cleared:
    the extension and deltalake commit behind Spark's back)."""
    delta_log = spark._jvm.org.apache.spark.sql.delta.DeltaLog
    delta_log.clearCache()
    return delta_log.forTable(spark._jsparkSession, str(path)).unsafeVolatileSnapshot()


def _spark_df(spark: Any, jdf: Any) -> Any:
    from pyspark.sql import DataFrame

    return DataFrame(jdf, spark)


def logical_partition_columns(spark: Any, path: str | Path, snapshot: Any = None) -> tuple[list[str], dict[str, str]]:
    """(partition columns, logical → physical name) of Spark's snapshot (column mapping keys
    ``partitionValues`` by physical name)."""
    metadata = (snapshot or spark_snapshot(spark, path)).metadata()
    seq = metadata.partitionColumns()
    columns = [seq.apply(i) for i in range(seq.size())]
    schema = json.loads(metadata.schemaString())
    physical = {f["name"]: f.get("metadata", {}).get("delta.columnMapping.physicalName", f["name"]) for f in schema["fields"]}
    return columns, physical


def files_spark(spark: Any, path: str | Path) -> list[LiveFile]:
    """Live files per Spark's Delta snapshot (``allFiles``): raw partition strings (labelled by
    Spark's own escaping), sizes, stats' numRecords and deletion vectors."""
    snapshot = spark_snapshot(spark, path)
    columns, physical = logical_partition_columns(spark, path, snapshot)
    out = []
    for row in _spark_df(spark, snapshot.allFiles().toDF()).select("path", "partitionValues", "size", "stats", "deletionVector").collect():
        raw = row["partitionValues"] or {}
        values = {col: raw.get(physical.get(col, col), raw.get(col)) for col in columns}
        stats = json.loads(row["stats"]) if row["stats"] else {}
        out.append(LiveFile(_abs(path, row["path"]), spark_partition_label(spark, columns, values), row["size"],
                            int(stats.get("numRecords", 0)), row["deletionVector"] is not None))
    return out


def spark_detail(spark: Any, path: str | Path) -> dict[str, Any]:
    """``DESCRIBE DETAIL`` of the table, as a dict."""
    return spark.sql(f"DESCRIBE DETAIL delta.`{path}`").collect()[0].asDict()


def spark_tombstones(spark: Any, path: str | Path) -> int:
    """Remove actions Spark keeps in its snapshot state: unexpired tombstones (Spark drops those
    older than ``delta.deletedFileRetentionDuration`` while replaying the log), one per
    (path, deletion vector)."""
    return spark_snapshot(spark, path).tombstones().count()


def by_label(files: Iterable[LiveFile]) -> dict[str, list[LiveFile]]:
    out: dict[str, list[LiveFile]] = defaultdict(list)
    for f in files:
        out[f.label].append(f)
    return dict(out)


def expected_profile(files: Iterable[LiveFile], small_mb: float, ratio: float = 0.35) -> dict[str, dict[str, Any]]:
    """lakehouse_fragmentation's rows as the reference's files imply them: label → figures
    (``None`` where the reader does not know: sizes from DuckDB, deletion vectors from deltalake)."""
    limit = small_mb * MIB
    out = {}
    for label, group in by_label(files).items():
        sizes = [f.size for f in group]
        known_sizes = all(s is not None for s in sizes)
        small = [s for s in sizes if known_sizes and s < limit]
        total = len(group)
        row: dict[str, Any] = {
            "total_files": total,
            "record_count": sum(f.records for f in group),
            "delete_files": sum(1 for f in group if f.has_dv) if all(f.has_dv is not None for f in group) else None,
            "total_size_bytes": sum(sizes) if known_sizes else None,
            "small_files": len(small) if known_sizes else None,
            "small_size_bytes": sum(small) if known_sizes else None,
        }
        row["fragmentation_ratio"] = row["small_files"] / total if known_sizes else None
        # Degraded when compaction can improve it: the ratio reached with two or more small files.
        row["requires_compaction"] = (row["fragmentation_ratio"] >= ratio and row["small_files"] >= 2) if known_sizes else None
        out[label] = row
    return out


# --------------------------------------------------------------------------- rows


def comparable(value: Any) -> Any:
    """One value in a form every reader agrees on: timestamps as naive UTC, NaN as a marker,
    binary as bytes, nested values as tuples."""
    from_row = getattr(value, "asDict", None)
    if from_row is not None and isinstance(value, tuple):  # a Spark Row
        return tuple(comparable(v) for v in value)
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.timezone.utc).replace(tzinfo=None) if value.tzinfo is not None else value
    if isinstance(value, float) and value != value:
        return "NaN"
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, dict):
        return tuple(sorted(((comparable(k), comparable(v)) for k, v in value.items()), key=repr))
    if isinstance(value, (list, tuple)):
        return tuple(comparable(v) for v in value)
    return value


def multiset(columns: list[str], rows: Iterable[Iterable[Any]]) -> list[tuple]:
    """Rows (columns in ``columns`` order, re-ordered by name) as a sorted list of tuples."""
    order = sorted(range(len(columns)), key=lambda i: columns[i])
    return sorted((tuple(comparable(row[i]) for i in order) for row in (list(r) for r in rows)), key=repr)


def arrow_multiset(table: pa.Table) -> list[tuple]:
    return multiset(table.column_names, zip(*(table.column(n).to_pylist() for n in table.column_names)))


def has_reader_feature(path: str | Path, feature: str, version: int | None = None) -> bool:
    table = DeltaTable(str(path), version=version)
    return feature in (table.protocol().reader_features or [])


def rows_deltalake(path: str | Path, version: int | None = None) -> list[tuple]:
    """Rows per deltalake: ``to_pyarrow_table`` where it can, its ``QueryBuilder`` (DataFusion)
    on tables with deletion vectors (``to_pyarrow_table`` refuses them) or column mapping (where
    ``to_pyarrow_table`` of deltalake 1.6.6 silently returns NULL for every non-partition column)."""
    table = DeltaTable(str(path), version=version)
    protocol = table.protocol()
    features = set(protocol.reader_features or []) | set(protocol.writer_features or [])
    column_mapping = table.metadata().configuration.get("delta.columnMapping.mode", "none") != "none"
    if "deletionVectors" in features or column_mapping:
        arrow = pa.table(QueryBuilder().register("t", table).execute("SELECT * FROM t").read_all())
    else:
        arrow = table.to_pyarrow_table()
    return arrow_multiset(arrow)


def load_delta(con: duckdb.DuckDBPyConnection) -> None:
    """LOADs DuckDB's delta extension from the pip wheel (never INSTALL: no network)."""
    con.execute(f"LOAD '{c.pip_extension_path('delta')}'")


def delta_connection() -> duckdb.DuckDBPyConnection:
    con = c.new_connection()
    load_delta(con)
    return con


def rows_duckdb(con: duckdb.DuckDBPyConnection, path: str | Path, version: int | None = None) -> list[tuple]:
    """Rows per DuckDB's ``delta_scan`` (applies deletion vectors)."""
    extra = f", version := {int(version)}" if version is not None else ""
    return arrow_multiset(con.execute(f"SELECT * FROM delta_scan('{path}'{extra})").to_arrow_table())


def rows_polars(path: str | Path, version: int | None = None) -> list[tuple]:
    """Rows per polars ``read_delta`` (applies deletion vectors; refuses column mapping)."""
    import polars as pl

    frame = pl.read_delta(str(path), version=version)
    return multiset(frame.columns, frame.rows())


def rows_spark(spark: Any, path: str | Path, version: int | None = None) -> list[tuple]:
    """Rows per Spark (Delta's own reader)."""
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", int(version))
    frame = reader.load(str(path))
    return multiset(frame.columns, frame.collect())


def rows_everywhere(spark: Any, con: duckdb.DuckDBPyConnection, path: str | Path, version: int | None = None,
                    polars: bool = True) -> dict[str, list[tuple]]:
    """Rows per every reader (polars can be left out: it refuses column mapping)."""
    out = {
        "deltalake": rows_deltalake(path, version),
        "duckdb": rows_duckdb(con, path, version),
        "spark": rows_spark(spark, path, version),
    }
    if polars:
        out["polars"] = rows_polars(path, version)
    return out


def expected_dat_rows(case: Path, version: str = "latest") -> list[tuple]:
    """A DAT case's expected rows (``expected/<version>/table_content*.parquet``)."""
    parts = sorted((case / "expected" / version).glob("table_content*"))
    return sorted((r for p in parts for r in arrow_multiset(pq.read_table(p))), key=repr)


# --------------------------------------------------------------------------- history


def current_version(path: str | Path) -> int:
    return DeltaTable(str(path)).version()


def commit_actions(path: str | Path, version: int) -> list[dict[str, Any]]:
    """The actions of ``_delta_log/<version>.json``, one dict per line."""
    with open(Path(path) / "_delta_log" / f"{version:020d}.json", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def commit_versions(path: str | Path) -> list[int]:
    """Versions of the commit files present in ``_delta_log``."""
    return sorted(int(p.name[:20]) for p in (Path(path) / "_delta_log").iterdir() if re.fullmatch(r"\d{20}\.json", p.name))


def log_files(path: str | Path) -> list[Path]:
    """Commit files and checkpoints (classic and multi-part) in ``_delta_log``."""
    pattern = re.compile(r"\d{20}\.(json|checkpoint\.parquet|checkpoint\.\d{10}\.\d{10}\.parquet|checkpoint\.[^.]+\.(json|parquet))")
    return sorted(p for p in (Path(path) / "_delta_log").iterdir() if pattern.fullmatch(p.name))


def listing(root: str | Path) -> dict[str, tuple[int, int]]:
    """Every file under ``root``: relative path → (size, mtime ns)."""
    root = Path(root)
    out = {}
    for dirpath, _, names in os.walk(root):
        for name in names:
            p = Path(dirpath) / name
            st = p.lstat()
            out[str(p.relative_to(root))] = (st.st_size, st.st_mtime_ns)
    return out


def data_listing(root: str | Path) -> set[str]:
    """Relative paths of the Parquet files outside ``_delta_log``."""
    return {p for p in listing(root) if p.endswith(".parquet") and not p.startswith("_delta_log/")}


def twin(src: str | Path, dst: str | Path) -> Path:
    """A byte-identical copy of a table directory, modification times included."""
    shutil.copytree(src, dst, symlinks=True, copy_function=shutil.copy2)
    return Path(dst)


# --------------------------------------------------------------------------- vacuum references


def vacuum_deltalake(path: str | Path, retention_hours: float, full: bool = True) -> set[str]:
    """Absolute paths deltalake's vacuum would delete (dry run, no retention check)."""
    listed = DeltaTable(str(path)).vacuum(retention_hours=retention_hours, dry_run=True, enforce_retention_duration=False, full=full)
    return {_abs(path, p) for p in listed}


def vacuum_spark(spark: Any, path: str | Path, retention_hours: float, lite: bool = False) -> set[str]:
    """Absolute paths of the files Spark's ``VACUUM … [LITE] RETAIN n HOURS DRY RUN`` would
    delete, with Delta's retention check off for the call. Spark's dry run also lists directories
    (even non-empty ones whose files are all too young): only files are kept here."""
    key = "spark.databricks.delta.retentionDurationCheck.enabled"
    before = spark.conf.get(key, "true")
    spark.conf.set(key, "false")
    try:
        mode = " LITE" if lite else ""
        rows = spark.sql(f"VACUUM delta.`{path}`{mode} RETAIN {retention_hours} HOURS DRY RUN").collect()
    finally:
        spark.conf.set(key, before)
    paths = {_abs(path, r["path"]) for r in rows}
    return {p for p in paths if os.path.isfile(p)}


def spark_vacuum_refuses(spark: Any, path: str | Path, retention_hours: float) -> str | None:
    """Spark's answer with its retention check on: the error text, or None when it accepts."""
    key = "spark.databricks.delta.retentionDurationCheck.enabled"
    before = spark.conf.get(key, "true")
    spark.conf.set(key, "true")
    try:
        spark.sql(f"VACUUM delta.`{path}` RETAIN {retention_hours} HOURS DRY RUN").collect()
        return None
    except Exception as err:  # noqa: BLE001 - the refusal is the answer
        return str(err)
    finally:
        spark.conf.set(key, before)


def deltalake_vacuum_refuses(path: str | Path, retention_hours: float) -> str | None:
    """deltalake's answer with ``enforce_retention_duration=True``: the error, or None."""
    try:
        DeltaTable(str(path)).vacuum(retention_hours=retention_hours, dry_run=True, enforce_retention_duration=True, full=True)
        return None
    except Exception as err:  # noqa: BLE001
        return str(err)


# --------------------------------------------------------------------------- aging


def age_files(root: str | Path, days: float = AGED_DAYS, include_log: bool = False) -> None:
    """Sets the modification time of every file under ``root`` (not ``_delta_log/`` unless
    ``include_log``) ``days`` into the past."""
    when = time.time() - days * DAY_S
    root = Path(root)
    for dirpath, _, names in os.walk(root):
        rel = Path(dirpath).relative_to(root)
        if not include_log and rel.parts[:1] == ("_delta_log",):
            continue
        for name in names:
            os.utime(Path(dirpath) / name, (when, when))


def backdate_removes(root: str | Path, versions: Iterable[int], days: float = AGED_DAYS) -> list[dict[str, Any]]:
    """Moves the ``deletionTimestamp`` of every remove action in the given commits ``days`` into
    the past (the JSON is rewritten in place; Hadoop's ``.<name>.crc`` beside it is dropped, as it
    would no longer match). Returns the removes, as rewritten."""
    when_ms = int((time.time() - days * DAY_S) * 1000)
    out = []
    for version in versions:
        commit = Path(root) / "_delta_log" / f"{version:020d}.json"
        lines = []
        for line in commit.read_text(encoding="utf-8").splitlines():
            action = json.loads(line) if line.strip() else None
            if action and "remove" in action:
                action["remove"]["deletionTimestamp"] = when_ms
                out.append(action["remove"])
                line = json.dumps(action, separators=(",", ":"), ensure_ascii=False)
            lines.append(line)
        commit.write_text("\n".join(lines) + "\n", encoding="utf-8")
        (commit.parent / f".{commit.name}.crc").unlink(missing_ok=True)
    return out


# Files planted by plant_untracked: relative path (``{p}``: a partition directory) → what Delta's
# VACUUM does with it. ``untracked``: deleted (older than the retention); ``young``: kept, too
# recent; ``hidden``: kept, a hidden name at the top; ``hidden below``: kept, a hidden name below
# the top (deltalake's full vacuum only looks at the first path component); ``log``: inside
# _delta_log, never touched.
PLANTED = {
    "{p}untracked-old.parquet": ("untracked", True),
    "untracked-old-root.parquet": ("untracked", True),
    "other/deep/untracked-old.parquet": ("untracked", True),
    "_change_data/cdc-00000-old.snappy.parquet": ("untracked", True),
    "{p}untracked-young.parquet": ("young", False),
    "_change_data/cdc-00001-young.snappy.parquet": ("young", False),
    "_tmp/staged-old.parquet": ("hidden", True),
    ".hidden-old.parquet": ("hidden", True),
    "{p}_staging/staged-old.parquet": ("hidden below", True),
    "{p}.hidden-old.parquet": ("hidden below", True),
    "{p}.untracked-old.parquet.crc": ("hidden below", True),
    "_delta_log/stray-old.tmp": ("log", True),
}


def plant_untracked(root: str | Path, partition_dir: str = "", kinds: Iterable[str] | None = None) -> dict[str, str]:
    """Writes the PLANTED files (``partition_dir``: an existing partition directory, relative,
    or "" for an unpartitioned table; ``kinds``: only those kinds); old ones dated AGED_DAYS
    back. Returns relative path → kind."""
    prefix = f"{partition_dir.rstrip('/')}/" if partition_dir else ""
    old = time.time() - AGED_DAYS * DAY_S
    wanted = set(kinds) if kinds is not None else None
    out = {}
    for i, (template, (kind, is_old)) in enumerate(PLANTED.items()):
        if wanted is not None and kind not in wanted:
            continue
        rel = template.format(p=prefix)
        path = Path(root) / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"PAR1" + bytes([65 + i]) * (100 + 17 * i))
        if is_old:
            os.utime(path, (old, old))
        out[rel] = kind
    return out


# --------------------------------------------------------------------------- deltalake builders


def _payload(i: int, width: int) -> str:
    """Incompressible text (so bulk files are large and small files stay small)."""
    return "".join(hashlib.sha256(f"{i}-{k}".encode()).hexdigest() for k in range(width // 64 + 1))[:width]


def _rows(ids: Iterable[int], s: str | None, n: int | None, d: dt.date | None, width: int = 8) -> pa.Table:
    ids = list(ids)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "s": pa.array([s] * len(ids), pa.string()),
            "n": pa.array([n] * len(ids), pa.int32()),
            "d": pa.array([d] * len(ids), pa.date32()),
            "amount": pa.array([None if i % 11 == 0 else i * 0.25 for i in ids], pa.float64()),
            "note": pa.array([_payload(i, width) for i in ids], pa.string()),
            "ts": pa.array([dt.datetime(2026, 10, 1, tzinfo=dt.timezone.utc) + dt.timedelta(minutes=i) for i in ids],
                           pa.timestamp("us", tz="UTC")),
        }
    )


def _concat(tables: list[pa.Table]) -> pa.Table:
    return pa.concat_tables(tables)


D1, D2, D3 = dt.date(2026, 10, 1), dt.date(2026, 10, 2), dt.date(2026, 10, 3)
# (s, n, d) of the fragmented deltalake table: how each partition is written.
DL_FRAGMENTED = {
    ("plain", 1, D1): "small",  # 8 small appends: degraded
    ("with space", 2, D1): "small",
    ("a/b", 1, D2): "small",
    ("😈", 2, D3): "small",
    (None, None, D1): "small",  # NULL string and NULL int
    ("plain", 1, None): "small",  # NULL date (3 appends)
    ("50%", 3, D2): "bulk",  # 3 bulk files + 1 small: healthy
    ("k=v", 1, D3): "bulk",
    ("single", 1, D1): "single",  # one small file: nothing to bin-pack
}
DL_PARTITION_COLUMNS = ["s", "n", "d"]


def dl_label(s: str | None, n: int | None, d: dt.date | None) -> str:
    return partition_label(DL_PARTITION_COLUMNS, {"s": s, "n": delta_string(n), "d": delta_string(d)})


def build_deltalake_fragmented(path: str | Path, rounds: int = 8) -> None:
    """deltalake ``write_deltalake``: partitioned by (s string, n int, d date), ``rounds`` small
    appends (one small file per 'small' partition each), bulk loads (three ~0.3 MiB files per
    'bulk' partition), one lone small file; values needing escaping and NULLs in every column."""
    path = str(path)
    next_id = 0
    for r in range(rounds):
        batch = []
        for (s, n, d), kind in DL_FRAGMENTED.items():
            if kind == "small" and not (d is None and r >= 3):
                batch.append(_rows(range(next_id, next_id + 5), s, n, d))
                next_id += 5
        write_deltalake(path, _concat(batch), mode="append", partition_by=DL_PARTITION_COLUMNS)
    for _ in range(3):
        batch = [_rows(range(next_id + k * 1000, next_id + k * 1000 + 1000), s, n, d, width=300)
                 for k, ((s, n, d), kind) in enumerate(DL_FRAGMENTED.items()) if kind == "bulk"]
        next_id += 10_000
        write_deltalake(path, _concat(batch), mode="append")
    batch = [_rows(range(next_id + k * 10, next_id + k * 10 + 3), s, n, d)
             for k, ((s, n, d), kind) in enumerate(DL_FRAGMENTED.items()) if kind in ("bulk", "single")]
    write_deltalake(path, _concat(batch), mode="append")


def build_deltalake_unpartitioned(path: str | Path, small_appends: int = 10) -> None:
    """deltalake: unpartitioned, ``small_appends`` small appends and one bulk load."""
    for r in range(small_appends):
        write_deltalake(str(path), _rows(range(r * 10, r * 10 + 4), f"s{r % 3}", r, D1), mode="append")
    write_deltalake(str(path), _rows(range(10_000, 11_000), "bulk", 0, D2, width=300), mode="append")


def build_deltalake_with_tombstones(path: str | Path) -> dict[str, Any]:
    """deltalake: partitioned by ``s`` ('a', 'b'), six small appends (v0-v5), then two
    copy-on-write deletes (v6, v7) and an overwrite of partition b (v8), each leaving tombstones,
    and four more small appends (v9-v12). Nothing is aged here (see ``age_vacuum_scenario``)."""
    path = str(path)
    for r in range(6):
        batch = [_rows(range(r * 100 + k * 10, r * 100 + k * 10 + 5), s, 1, D1) for k, s in enumerate(("a", "b"))]
        write_deltalake(path, _concat(batch), mode="append", partition_by=["s"])
    table = DeltaTable(path)
    table.delete("id % 100 = 0")  # v6: rewrites the 'a' files holding ids 0, 100, ...
    table = DeltaTable(path)
    table.delete("id % 100 = 11")  # v7: rewrites 'b' files
    write_deltalake(path, _rows(range(5000, 5004), "b", 1, D1), mode="overwrite", predicate="s = 'b'")  # v8
    for r in range(4):  # v9-v12: both partitions fragmented again
        batch = [_rows(range(7000 + r * 100 + k * 10, 7000 + r * 100 + k * 10 + 5), s, 1, D1) for k, s in enumerate(("a", "b"))]
        write_deltalake(path, _concat(batch), mode="append")
    return {"removes_in": [6, 7, 8], "version": DeltaTable(path).version()}


# --------------------------------------------------------------------------- Spark builders


def spark_sql(spark: Any, statement: str) -> list[Any]:
    return spark.sql(statement).collect()


SP_REGIONS = ["eu", "us west", "a/b", "é😈", None]


def build_spark_small_inserts(spark: Any, path: str | Path, inserts: int = 11) -> None:
    """Spark: partitioned by (region string, day date), ``inserts`` small INSERTs of two tasks
    each (two files per partition per INSERT), then a bulk INSERT into a new partition (healthy).
    CREATE + 11 INSERTs + 1: Spark checkpoints at version 10, so the table has a checkpoint and
    two commits after it."""
    t = f"delta.`{path}`"
    spark_sql(spark, f"CREATE TABLE {t} (id bigint, region string, day date, amount double, note string) "
                     "USING delta PARTITIONED BY (region, day)")
    regions = "array(" + ", ".join("NULL" if r is None else f"'{r}'" for r in SP_REGIONS) + ")"
    for k in range(inserts):
        spark_sql(spark, f"""INSERT INTO {t} SELECT /*+ REPARTITION(2) */ id,
                  element_at({regions}, cast(id % {len(SP_REGIONS)} as int) + 1),
                  DATE '2026-10-01' + cast(id % 2 as int), id * 1.5, concat('n', id)
                  FROM range({k * 1000}, {k * 1000 + 40})""")
    spark_sql(spark, f"""INSERT INTO {t} SELECT /*+ REPARTITION(3) */ id, 'bulk', DATE '2026-10-03', id * 0.5,
              sha2(cast(id as string), 256) || sha2(cast(id + 1 as string), 256) || sha2(cast(id + 2 as string), 256)
              FROM range(100000, 103000)""")


def build_spark_deletion_vectors(spark: Any, path: str | Path) -> dict[str, Any]:
    """Spark with deletion vectors: partitioned by ``part`` ('a', 'b', 'c', 'd'), 4 small INSERTs
    of two tasks (v1-v4); DELETEs that write deletion vectors: 'a' twice (v5, v6: v6's removes
    carry v5's vectors), 'b' twice (v7, v8); v9 deletes partition 'c' whole (plain removes).
    'd' never gets a vector. Versions stay below Spark's checkpoint interval (10)."""
    t = f"delta.`{path}`"
    spark_sql(spark, f"CREATE TABLE {t} (id bigint, part string, v string) USING delta PARTITIONED BY (part) "
                     "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    for k in range(4):
        spark_sql(spark, f"""INSERT INTO {t} SELECT /*+ REPARTITION(2) */ id,
                  element_at(array('a', 'b', 'c', 'd'), cast(id % 4 as int) + 1), concat('v', id)
                  FROM range({k * 1000}, {k * 1000 + 80})""")
    spark_sql(spark, f"DELETE FROM {t} WHERE part = 'a' AND id % 3 = 0")  # v5
    spark_sql(spark, f"DELETE FROM {t} WHERE part = 'a' AND id % 5 = 0")  # v6
    spark_sql(spark, f"DELETE FROM {t} WHERE part = 'b' AND id % 3 = 0")  # v7
    spark_sql(spark, f"DELETE FROM {t} WHERE part = 'b' AND id % 5 = 0")  # v8
    spark_sql(spark, f"DELETE FROM {t} WHERE part = 'c'")  # v9
    return {"expire_versions": [6, 9], "keep_versions": [5, 7, 8]}


def build_spark_purge(spark: Any, path: str | Path) -> dict[str, int]:
    """Spark with deletion vectors on large files: unpartitioned, two INSERTs of one 3000-row file
    each (v1, v2); v3 deletes 10 % of the first file's rows (a vector of 300 rows), v4 1 % of the
    second's (30 rows), v5 another 10 % of the first (v5's vector replaces v3's: 600 rows). What
    each file's vector deletes, by the id range its rows have."""
    t = f"delta.`{path}`"
    spark_sql(spark, f"CREATE TABLE {t} (id bigint, v string, x double) USING delta "
                     "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    for k in range(2):
        spark_sql(spark, f"INSERT INTO {t} SELECT /*+ REPARTITION(1) */ id, concat('v', id), id * 0.5 "
                         f"FROM range({k * 10000}, {k * 10000 + 3000})")
    spark_sql(spark, f"DELETE FROM {t} WHERE id < 10000 AND id % 10 = 0")  # v3
    spark_sql(spark, f"DELETE FROM {t} WHERE id >= 10000 AND id % 100 = 1")  # v4
    spark_sql(spark, f"DELETE FROM {t} WHERE id < 10000 AND id % 10 = 1")  # v5
    return {"first": 600, "second": 30}


def build_spark_column_mapping(spark: Any, path: str | Path) -> None:
    """Spark with column mapping by name: partitioned by ``cat`` (directories named by the
    physical column name), three INSERTs around a column rename."""
    t = f"delta.`{path}`"
    spark_sql(spark, f"CREATE TABLE {t} (id bigint, cat string, v string) USING delta PARTITIONED BY (cat) "
                     "TBLPROPERTIES ('delta.columnMapping.mode' = 'name')")
    for k in range(2):
        spark_sql(spark, f"INSERT INTO {t} SELECT /*+ REPARTITION(2) */ id, CASE WHEN id % 2 = 0 THEN 'x y' ELSE 'z' END, "
                         f"concat('v', id) FROM range({k * 100}, {k * 100 + 20})")
    spark_sql(spark, f"ALTER TABLE {t} RENAME COLUMN v TO w")
    spark_sql(spark, f"INSERT INTO {t} SELECT /*+ REPARTITION(2) */ id, 'z', concat('w', id) FROM range(500, 520)")


def build_spark_column_mapping_id(spark: Any, path: str | Path) -> None:
    """Spark with column mapping by id: partitioned by ``cat``, a struct column, deletion vectors;
    INSERTs around a RENAME (also of a struct child), a DROP COLUMN and an ADD COLUMN (so files
    hold a dropped column and lack an added one), and a DELETE writing vectors."""
    t = f"delta.`{path}`"
    spark_sql(spark, f"CREATE TABLE {t} (id bigint, cat string, v string, s struct<a: int, b: string>, gone double) "
                     "USING delta PARTITIONED BY (cat) TBLPROPERTIES ('delta.columnMapping.mode' = 'id', "
                     "'delta.enableDeletionVectors' = 'true')")
    for k in range(2):
        spark_sql(spark, f"INSERT INTO {t} SELECT /*+ REPARTITION(2) */ id, CASE WHEN id % 2 = 0 THEN 'x' ELSE 'y' END, "
                         f"concat('v', id), named_struct('a', CAST(id AS INT), 'b', concat('b', id)), id * 1.5 "
                         f"FROM range({k * 100}, {k * 100 + 20})")
    spark_sql(spark, f"ALTER TABLE {t} RENAME COLUMN v TO w")
    spark_sql(spark, f"ALTER TABLE {t} RENAME COLUMN s.a TO aa")
    spark_sql(spark, f"ALTER TABLE {t} DROP COLUMN gone")
    spark_sql(spark, f"ALTER TABLE {t} ADD COLUMNS (added string)")
    spark_sql(spark, f"INSERT INTO {t} SELECT /*+ REPARTITION(2) */ id, 'x', concat('w', id), "
                     f"named_struct('aa', CAST(id AS INT), 'b', 'n'), concat('a', id) FROM range(500, 520)")
    spark_sql(spark, f"DELETE FROM {t} WHERE id % 7 = 0")


def build_spark_row_tracking(spark: Any, path: str | Path) -> None:
    """Spark with row tracking and deletion vectors: partitioned by ``p`` ('a', 'b'), four small
    INSERTs of two tasks, an UPDATE (whose rows get materialized row ids and commit versions),
    a DELETE (vectors)."""
    t = f"delta.`{path}`"
    spark_sql(spark, f"CREATE TABLE {t} (id bigint, p string, v string) USING delta PARTITIONED BY (p) "
                     "TBLPROPERTIES ('delta.enableRowTracking' = 'true', 'delta.enableDeletionVectors' = 'true')")
    for k in range(4):
        spark_sql(spark, f"INSERT INTO {t} SELECT /*+ REPARTITION(2) */ id, IF(id % 2 = 0, 'a', 'b'), concat('v', id) "
                         f"FROM range({k * 100}, {k * 100 + 30})")
    spark_sql(spark, f"UPDATE {t} SET v = concat('u', v) WHERE id % 5 = 0")
    spark_sql(spark, f"DELETE FROM {t} WHERE id % 7 = 0")


# Spark 4 tables with one newer feature each, fragmented by small INSERTs: name -> (columns,
# table properties / clause, a row expression over `id`, statements after the first INSERTs).
def nested_widened(clause: str) -> tuple[str, str, str, list[str]]:
    """A FEATURE_TABLES entry widened at ``s.a``, ``l.element``, ``m.key`` and ``m.value`` after
    every INSERT, so every file is narrow and the rewrite must widen; ``clause`` its properties."""
    return ("id bigint, s struct<a: int, b: string>, l array<int>, m map<int, int>",
            clause,
            "id, CASE WHEN id % 7 = 0 THEN NULL ELSE named_struct('a', CAST(id AS INT), 'b', concat('v', id)) END, "
            "array(CAST(id AS INT), NULL), map(CAST(id AS INT), CAST(-id AS INT))",
            [f"ALTER TABLE {{t}} ALTER COLUMN {field} TYPE bigint" for field in ("s.a", "l.element", "m.key", "m.value")])


FEATURE_TABLES: dict[str, tuple[str, str, str, list[str]]] = {
    "ict": ("id bigint, v string", "TBLPROPERTIES ('delta.enableInCommitTimestamps' = 'true')",
            "id, concat('v', id)", []),
    "widened": ("id bigint, n int", "TBLPROPERTIES ('delta.enableTypeWidening' = 'true')", "id, CAST(id AS INT)",
                ["ALTER TABLE {t} ALTER COLUMN n TYPE bigint",
                 "INSERT INTO {t} SELECT id, id * 10000000000 FROM range(900, 905)"]),
    "nested_widened": nested_widened("TBLPROPERTIES ('delta.enableTypeWidening' = 'true')"),
    "nested_widened_mapped": nested_widened(
        "TBLPROPERTIES ('delta.enableTypeWidening' = 'true', 'delta.columnMapping.mode' = 'name')"),
    "ntz": ("id bigint, t timestamp_ntz", "", "id, TIMESTAMP_NTZ '2026-10-01 05:00:00.123456' + make_interval(0, 0, 0, 0, 0, 0, id)", []),
    "v2cp": ("id bigint, v string", "TBLPROPERTIES ('delta.checkpointPolicy' = 'v2', 'delta.checkpointInterval' = '3')",
             "id, concat('v', id)", []),
    "variant": ("id bigint, j variant", "", "id, parse_json(concat('{\"a\": ', id, '}'))", []),
    "clustered": ("id bigint, v string", "CLUSTER BY (id, v)", "id, concat('v', id)", []),
    # Iceberg compatibility (no conversion: that takes Delta's delta-iceberg jar and a metastore):
    # column mapping with element, key and value ids, which its files carry as Parquet field ids,
    # and the partition column materialized in the files.
    "icebergcompat": ("id bigint, p string, a array<int>, m map<string, array<int>>, s struct<x: int, l: array<int>>",
                      "PARTITIONED BY (p) TBLPROPERTIES ('delta.enableIcebergCompatV2' = 'true', 'delta.columnMapping.mode' = 'name', "
                      "'delta.enableDeletionVectors' = 'false')",
                      "id, concat('p', id % 2), array(CAST(id AS INT)), map(concat('k', id), array(CAST(id AS INT), 1)), "
                      "named_struct('x', CAST(id AS INT), 'l', array(2))", []),
}


def build_spark_feature_table(spark: Any, path: str | Path, name: str) -> None:
    """The FEATURE_TABLES table ``name``: four INSERTs of two tasks, then its statements."""
    columns, clause, row, after = FEATURE_TABLES[name]
    t = f"delta.`{path}`"
    spark_sql(spark, f"CREATE TABLE {t} ({columns}) USING delta {clause}")
    for k in range(4):
        spark_sql(spark, f"INSERT INTO {t} SELECT /*+ REPARTITION(2) */ {row} FROM range({k * 100}, {k * 100 + 20})")
    for statement in after:
        spark_sql(spark, statement.format(t=t))


# --------------------------------------------------------------------------- vacuum scenarios


@dataclasses.dataclass
class VacuumScenario:
    """A table aged for vacuum: tombstones of ``expired_versions`` 30 days old, every file (not
    the log) 30 days old, then PLANTED files (old and young) added."""

    path: Path
    planted: dict[str, str]  # relative path -> kind (see PLANTED)
    backdated_removes: list[dict[str, Any]]

    def planted_paths(self, *kinds: str) -> set[str]:
        return {str(self.path / rel) for rel, kind in self.planted.items() if kind in kinds}


def age_vacuum_scenario(path: str | Path, expired_versions: Iterable[int], partition_dir: str = "",
                        kinds: Iterable[str] | None = None) -> VacuumScenario:
    """Ages a table in place (see VacuumScenario); ``kinds``: which PLANTED files (all)."""
    removes = backdate_removes(path, expired_versions)
    age_files(path)
    planted = plant_untracked(path, partition_dir, kinds)
    return VacuumScenario(Path(path), planted, removes)


def dv_file_paths(table: str | Path, descriptors: Iterable[Mapping[str, Any] | None]) -> set[str]:
    """Absolute paths of the deletion-vector files (storage type 'u': a z85-encoded UUID, with an
    optional random prefix) of the given descriptors."""
    out = set()
    for d in descriptors:
        if not d or d.get("storageType") != "u":
            continue
        encoded = d["pathOrInlineDv"]
        prefix, z85 = encoded[:-20], encoded[-20:]
        uid = _z85_decode(z85)
        name = f"deletion_vector_{uid[0:8]}-{uid[8:12]}-{uid[12:16]}-{uid[16:20]}-{uid[20:32]}.bin"
        out.add(str(Path(table) / prefix / name) if prefix else str(Path(table) / name))
    return out


_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"


def _z85_decode(text: str) -> str:
    """Z85 (ZeroMQ) → hex, as Delta encodes deletion-vector file UUIDs."""
    raw = bytearray()
    for i in range(0, len(text), 5):
        value = 0
        for ch in text[i : i + 5]:
            value = value * 85 + _Z85.index(ch)
        raw += value.to_bytes(4, "big")
    return raw.hex()


def log_dv_descriptors(path: str | Path, kind: str) -> list[dict[str, Any]]:
    """Deletion-vector descriptors of every ``kind`` ('add' / 'remove') action in the commits."""
    out = []
    for version in commit_versions(path):
        for action in commit_actions(path, version):
            if kind in action and action[kind].get("deletionVector"):
                out.append(action[kind]["deletionVector"])
    return out


def parquet_stats(path: str | Path) -> dict[str, Any]:
    """numRecords, min/max/null counts per top-level column, computed by pyarrow from the rows
    (not the footer): the truth a Delta add's stats must state."""
    table = pq.read_table(path)
    import pyarrow.compute as pc

    stats: dict[str, Any] = {"numRecords": table.num_rows, "minValues": {}, "maxValues": {}, "nullCount": {}}
    for name in table.column_names:
        column = table.column(name)
        stats["nullCount"][name] = column.null_count
        if pa.types.is_nested(column.type) or pa.types.is_binary(column.type) or column.null_count == len(column):
            continue
        mm = pc.min_max(column).as_py()
        stats["minValues"][name], stats["maxValues"][name] = mm["min"], mm["max"]
    return stats


def counts(values: Iterable[Any]) -> Counter:
    return Counter(values)
