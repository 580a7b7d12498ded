"""Fixtures for the lakehouse integration tests.

The tests compare what the `lakehouse` extension reports about Iceberg tables with what two
independent readers say about the same tables: pyiceberg (``table.inspect.files()``) and
DuckDB's own iceberg extension (``iceberg_metadata``). This module provides:

* the paths of the built extension (``LAKEHOUSE_EXTENSION``, default
  ``build/debug/lakehouse.duckdb_extension``) and of the pip-installed DuckDB iceberg/avro
  extensions (never ``INSTALL``-ed: there is no network);
* DuckDB connections with those extensions loaded (tests skip cleanly when the lakehouse
  extension has not been built);
* a session-wide warehouse: a pyiceberg ``SqlCatalog`` on sqlite in a temp directory, holding
  one table per scenario (see :func:`warehouse`).

pyiceberg 0.12 cannot write everything the scenarios need: bucket and time transforms need
the optional ``pyiceberg-core`` package, and ``table.delete`` falls back to copy-on-write even in
merge-on-read mode. For those cases :func:`append_partitioned` / :func:`commit_files` write the
Parquet files here and commit them through pyiceberg's snapshot producer, into a data or a
delete manifest.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import glob
import importlib.util
import os
import sys
import uuid
import warnings
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import EqualTo, GreaterThanOrEqual
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestWriterV2,
)
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Operation
from pyiceberg.table.update.snapshot import _FastAppendFiles
from pyiceberg.transforms import (
    BucketTransform,
    DayTransform,
    HourTransform,
    IdentityTransform,
    MonthTransform,
    YearTransform,
)
from pyiceberg.typedef import Record
from pyiceberg.types import BooleanType, DateType, IntegerType, LongType, NestedField, StringType, TimestampType

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_EXTENSION = REPO_ROOT / "build" / "debug" / "lakehouse.duckdb_extension"

NAMESPACE = "ns"
CATALOG_NAME = "default"
# A second catalog name in the same sqlite database; it holds `ns.by_date` registered by location.
OTHER_CATALOG_NAME = "lake"

# Field ids the Iceberg spec reserves for the columns of position delete files.
POS_DELETE_FILE_PATH_ID = 2147483546
POS_DELETE_POS_ID = 2147483545


# --------------------------------------------------------------------------- extensions


def run_paused_before_commit(run, concurrent_change, has_written, monkeypatch, outcome: dict | None = None,
                             pause_ms: int = 3000) -> dict:
    """Runs ``run()`` in a thread with its commit held back (LAKEHOUSE_TEST_PAUSE_BEFORE_COMMIT_MS,
    a hook of the test build); once ``has_written()`` says its rewrite wrote an output (so it is
    past planning and reading), ``concurrent_change()`` commits. Returns the outcome: "rows" or
    "error", and "paused" (the run was still waiting when the change committed). ``pause_ms``: how
    long the commit is held back (long enough for ``concurrent_change``)."""
    import threading
    import time

    monkeypatch.setenv("LAKEHOUSE_TEST_PAUSE_BEFORE_COMMIT_MS", str(pause_ms))
    outcome = {} if outcome is None else outcome

    def target():
        try:
            outcome["rows"] = run()
        except Exception as e:  # noqa: BLE001 - reported to the test
            outcome["error"] = str(e)

    worker = threading.Thread(target=target)
    worker.start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and worker.is_alive() and not has_written():
        time.sleep(0.02)
    time.sleep(0.5)  # the remaining groups of a small table
    outcome["paused"] = worker.is_alive()
    concurrent_change()
    worker.join(timeout=90)
    return outcome


def fixtures_dir() -> Path:
    """The shared read-only fixtures: ``$LAKEHOUSE_FIXTURES``, else ``../shared/fixtures`` beside
    the repository (where the team keeps them), else ``/work/shared/fixtures``."""
    candidates = [os.environ.get("LAKEHOUSE_FIXTURES"), REPO_ROOT.parent / "shared" / "fixtures", "/work/shared/fixtures"]
    for candidate in candidates:
        if candidate and Path(candidate).is_dir():
            return Path(candidate)
    return REPO_ROOT.parent / "shared" / "fixtures"


def lakehouse_extension_path() -> Path:
    """The built extension: ``$LAKEHOUSE_EXTENSION`` (relative to the repo root) or the default."""
    path = Path(os.environ.get("LAKEHOUSE_EXTENSION", str(DEFAULT_EXTENSION)))
    return path if path.is_absolute() else REPO_ROOT / path


def pip_extension_path(name: str) -> str:
    """Path of ``<name>.duckdb_extension`` shipped by the ``duckdb-extension-<name>`` wheel."""
    spec = importlib.util.find_spec(f"duckdb_extension_{name}")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"python package duckdb-extension-{name} is not installed")
    for location in spec.submodule_search_locations:
        pattern = os.path.join(location, "extensions", f"v{duckdb.__version__}", f"{name}.duckdb_extension")
        found = sorted(glob.glob(pattern)) or sorted(
            glob.glob(os.path.join(location, "extensions", "*", f"{name}.duckdb_extension"))
        )
        if found:
            return found[-1]
    raise RuntimeError(f"no {name}.duckdb_extension inside duckdb-extension-{name}")


def load_iceberg(con: duckdb.DuckDBPyConnection) -> None:
    """LOADs DuckDB's avro and iceberg extensions from the pip wheels (never INSTALL)."""
    con.execute(f"LOAD '{pip_extension_path('avro')}'")
    con.execute(f"LOAD '{pip_extension_path('iceberg')}'")


def new_connection() -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB that accepts unsigned extensions."""
    return duckdb.connect(config={"allow_unsigned_extensions": "true"})


@pytest.fixture(scope="session")
def lakehouse_extension() -> Path:
    """Path of the built lakehouse extension; skips the test when it has not been built."""
    path = lakehouse_extension_path()
    if not path.is_file():
        pytest.skip(f"lakehouse extension not built: {path} does not exist (run make, or set LAKEHOUSE_EXTENSION)")
    return path


@pytest.fixture
def con(lakehouse_extension: Path) -> Iterable[duckdb.DuckDBPyConnection]:
    """A fresh DuckDB with the lakehouse extension loaded."""
    connection = new_connection()
    connection.execute(f"LOAD '{lakehouse_extension}'")
    yield connection
    connection.close()


@pytest.fixture(scope="session")
def iceberg_con() -> Iterable[duckdb.DuckDBPyConnection]:
    """A DuckDB with DuckDB's own iceberg extension loaded (the independent reader)."""
    connection = new_connection()
    load_iceberg(connection)
    yield connection
    connection.close()


# --------------------------------------------------------------------------- low-level writes


class _DeleteManifestWriterV2(ManifestWriterV2):
    """A v2 manifest writer whose manifest holds delete files (content ``deletes``)."""

    def content(self) -> ManifestContent:
        return ManifestContent.DELETES

    @property
    def _meta(self) -> dict[str, str]:
        return {**super()._meta, "content": "deletes"}


class _AddFiles(_FastAppendFiles):
    """A fast append of ready-made files, written to a manifest of their content kind."""

    def __init__(self, *args: Any, deletes: bool, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deletes = deletes

    def _manifests(self) -> list:
        writer_class = _DeleteManifestWriterV2 if self._deletes else ManifestWriterV2
        spec = self._transaction.table_metadata.spec()
        with writer_class(spec, self.schema(), self.new_manifest_output(), self._snapshot_id, self._compression) as writer:
            for data_file in self._added_data_files:
                writer.add(
                    ManifestEntry.from_args(
                        status=ManifestEntryStatus.ADDED,
                        snapshot_id=self._snapshot_id,
                        sequence_number=None,
                        file_sequence_number=None,
                        data_file=data_file,
                    )
                )
        return [writer.to_manifest_file()] + self._existing_manifests()


def write_parquet(table: Table, rows: pa.Table, subdir: str) -> tuple[str, int]:
    """Writes ``rows`` to a new Parquet file under the table's data dir; returns (uri, size)."""
    location = f"{table.location()}/data/{subdir}/{uuid.uuid4()}.parquet"
    with table.io.new_output(location).create() as stream:
        pq.write_table(rows, stream)
    return location, len(table.io.new_input(location))


def commit_files(table: Table, files: list[DataFile], deletes: bool = False) -> Table:
    """Commits ready-made data (or delete) files as one new snapshot; returns the refreshed table."""
    operation = Operation.DELETE if deletes else Operation.APPEND
    with table.transaction() as tx:
        producer = _AddFiles(operation=operation, transaction=tx, io=table.io, deletes=deletes)
        for data_file in files:
            producer.append_data_file(data_file)
        producer.commit()
    return table.refresh()


def data_file(table: Table, rows: pa.Table, partition: tuple, subdir: str) -> DataFile:
    """Writes one data file holding ``rows`` (already in the table's Arrow schema)."""
    path, size = write_parquet(table, rows, subdir)
    return DataFile.from_args(
        content=DataFileContent.DATA,
        file_path=path,
        file_format=FileFormat.PARQUET,
        partition=Record(*partition),
        record_count=rows.num_rows,
        file_size_in_bytes=size,
        spec_id=table.spec().spec_id,
    )


def position_delete_file(table: Table, target: DataFile, positions: list[int]) -> DataFile:
    """Writes a position delete file deleting ``positions`` of ``target``."""
    schema = pa.schema(
        [
            pa.field("file_path", pa.string(), nullable=False, metadata={"PARQUET:field_id": str(POS_DELETE_FILE_PATH_ID)}),
            pa.field("pos", pa.int64(), nullable=False, metadata={"PARQUET:field_id": str(POS_DELETE_POS_ID)}),
        ]
    )
    rows = pa.table({"file_path": [target.file_path] * len(positions), "pos": positions}, schema=schema)
    path, size = write_parquet(table, rows, "deletes")
    return DataFile.from_args(
        content=DataFileContent.POSITION_DELETES,
        file_path=path,
        file_format=FileFormat.PARQUET,
        partition=target.partition,
        record_count=rows.num_rows,
        file_size_in_bytes=size,
        spec_id=target.spec_id,
    )


def equality_delete_file(table: Table, partition: Record, column: str, values: list) -> DataFile:
    """Writes an equality delete file on ``column`` for ``values`` within ``partition``."""
    field = table.schema().find_field(column)
    arrow_field = schema_to_pyarrow(Schema(field)).field(0)
    rows = pa.table({column: pa.array(values, arrow_field.type)}, schema=pa.schema([arrow_field]))
    path, size = write_parquet(table, rows, "deletes")
    return DataFile.from_args(
        content=DataFileContent.EQUALITY_DELETES,
        file_path=path,
        file_format=FileFormat.PARQUET,
        partition=partition,
        record_count=rows.num_rows,
        file_size_in_bytes=size,
        equality_ids=[field.field_id],
        spec_id=table.spec().spec_id,
    )


def live_data_files(table: Table) -> list[DataFile]:
    """The live data files of the table's current snapshot, as pyiceberg DataFiles."""
    return [task.file for task in table.scan().plan_files()]


# --------------------------------------------------------------------------- scenarios


def _date_rows(ids: Iterable[int], day: dt.date) -> pa.Table:
    ids = list(ids)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "event_date": pa.array([day] * len(ids), pa.date32()),
            "payload": pa.array([f"row-{i}-" + "x" * 20 for i in ids]),
        }
    )


_DATE_SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "event_date", DateType(), required=False),
    NestedField(3, "payload", StringType(), required=False),
)
_DATE_SPEC = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="partition_date"))


def build_identity_date(catalog: SqlCatalog) -> Table:
    """(a) identity(event_date) as ``partition_date``: 12 small appends over two days, one big one."""
    table = catalog.create_table(f"{NAMESPACE}.by_date", schema=_DATE_SCHEMA, partition_spec=_DATE_SPEC)
    for i in range(12):
        table.append(_date_rows(range(i * 10, i * 10 + 5), dt.date(2026, 10, 1 + i % 2)))
    table.append(_date_rows(range(10_000, 30_000), dt.date(2026, 10, 3)))
    return table


def build_unpartitioned(catalog: SqlCatalog) -> Table:
    """(b) An unpartitioned table with a few appends."""
    schema = Schema(NestedField(1, "id", LongType(), required=False), NestedField(2, "name", StringType(), required=False))
    table = catalog.create_table(f"{NAMESPACE}.unpartitioned", schema=schema)
    for i in range(4):
        n = 3 + i * 100
        table.append(pa.table({"id": pa.array(range(n), pa.int64()), "name": [f"n{j}" for j in range(n)]}))
    return table


def _to_internal(value: Any) -> Any:
    """A Python value in Iceberg's internal form (what transforms take): days, micros, …"""
    if isinstance(value, dt.datetime):
        return (value - dt.datetime(1970, 1, 1)) // dt.timedelta(microseconds=1)
    if isinstance(value, dt.date):
        return (value - dt.date(1970, 1, 1)).days
    return value


def append_partitioned(table: Table, rows: list[dict[str, Any]]) -> Table:
    """Appends ``rows`` as one snapshot, one data file per partition tuple, written here.

    The partition tuples are computed with pyiceberg's own pure-Python transforms, so any
    transform works without pyiceberg-core (which pyiceberg needs to write bucket/time
    partitions itself).
    """
    schema = table.schema()
    spec = table.spec()
    transforms = [
        (field.transform.transform(schema.find_field(field.source_id).field_type), schema.find_field(field.source_id).name)
        for field in spec.fields
    ]
    groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[tuple(fn(_to_internal(row[column])) for fn, column in transforms)].append(row)
    arrow_schema = schema_to_pyarrow(schema)
    files = []
    for key, members in sorted(groups.items(), key=repr):
        arrow = pa.Table.from_pylist(members, schema=arrow_schema)
        subdir = "/".join(f"{field.name}={value}" for field, value in zip(spec.fields, key)) or "unpartitioned"
        files.append(data_file(table, arrow, key, subdir))
    return commit_files(table, files)


def build_day_bucket(catalog: SqlCatalog) -> Table:
    """(c) day(ts) + bucket(4, id): a two-field spec, three commits, including null days."""
    schema = Schema(NestedField(1, "id", IntegerType(), required=False), NestedField(2, "ts", TimestampType(), required=False))
    spec = PartitionSpec(
        PartitionField(source_id=2, field_id=1000, transform=DayTransform(), name="ts_day"),
        PartitionField(source_id=1, field_id=1001, transform=BucketTransform(4), name="id_bucket"),
    )
    table = catalog.create_table(f"{NAMESPACE}.day_bucket", schema=schema, partition_spec=spec)
    for commit in range(3):
        rows = [
            {"id": i, "ts": None if i % 29 == 0 else dt.datetime(2026, 10, 1 + i % 3, i % 24, 30)}
            for i in range(commit * 100, commit * 100 + 60)
        ]
        table = append_partitioned(table, rows)
    return table


def build_time_transforms(catalog: SqlCatalog) -> Table:
    """(c') hour(ts), month(d), year(d2) and identity on a boolean, with some nulls."""
    schema = Schema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(2, "ts", TimestampType(), required=False),
        NestedField(3, "d", DateType(), required=False),
        NestedField(4, "d2", DateType(), required=False),
        NestedField(5, "flag", BooleanType(), required=False),
    )
    spec = PartitionSpec(
        PartitionField(source_id=2, field_id=1000, transform=HourTransform(), name="ts_hour"),
        PartitionField(source_id=3, field_id=1001, transform=MonthTransform(), name="d_month"),
        PartitionField(source_id=4, field_id=1002, transform=YearTransform(), name="d2_year"),
        PartitionField(source_id=5, field_id=1003, transform=IdentityTransform(), name="flag"),
    )
    table = catalog.create_table(f"{NAMESPACE}.time_transforms", schema=schema, partition_spec=spec)
    for commit in range(2):
        rows = [
            {
                "id": i,
                "ts": dt.datetime(2026, 10, 1, 5 + i % 2, 15),
                "d": dt.date(2026, 9 + i % 2, 28),
                "d2": None if i % 5 == 0 else dt.date(1969 + i % 2 * 57, 12, 31),
                "flag": i % 3 == 0,
            }
            for i in range(commit * 50, commit * 50 + 20)
        ]
        table = append_partitioned(table, rows)
    return table


def build_evolved_spec(catalog: SqlCatalog) -> Table:
    """(d) identity(region), then the spec gains identity(tier); a null region along the way."""
    schema = Schema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(2, "region", StringType(), required=False),
        NestedField(3, "tier", IntegerType(), required=False),
    )
    spec = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="region"))
    table = catalog.create_table(f"{NAMESPACE}.evolved", schema=schema, partition_spec=spec)

    def rows(start: int, n: int) -> pa.Table:
        ids = list(range(start, start + n))
        return pa.table(
            {
                "id": pa.array(ids, pa.int64()),
                "region": [None if i % 7 == 0 else ("eu", "us")[i % 2] for i in ids],
                "tier": pa.array([i % 3 for i in ids], pa.int32()),
            }
        )

    table.append(rows(0, 30))
    table.append(rows(100, 30))
    with table.update_spec() as update:
        update.add_identity("tier")
    table = table.refresh()
    table.append(rows(200, 40))
    table.append(rows(300, 10))
    return table


def build_with_deletes(catalog: SqlCatalog) -> tuple[Table, bool]:
    """(e) Delete files in merge-on-read mode.

    First tries ``table.delete`` with ``write.delete.mode=merge-on-read``; pyiceberg 0.12 warns
    and rewrites the data file instead. Then commits one position delete file and one equality
    delete file written here, so the table has live delete files either way. Returns the table
    and whether pyiceberg itself produced delete files.
    """
    table = catalog.create_table(
        f"{NAMESPACE}.with_deletes",
        schema=_DATE_SCHEMA,
        partition_spec=_DATE_SPEC,
        properties={"write.delete.mode": "merge-on-read"},
    )
    for day in (1, 2, 3):
        table.append(_date_rows(range(day * 1000, day * 1000 + 50), dt.date(2026, 10, day)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table.delete(EqualTo("id", 1003))
    table = table.refresh()
    pyiceberg_wrote_deletes = any(c != 0 for c in table.inspect.files().column("content").to_pylist())

    files = {f.partition[0]: f for f in live_data_files(table)}
    day1 = (dt.date(2026, 10, 1) - dt.date(1970, 1, 1)).days
    day2 = day1 + 1
    position = position_delete_file(table, files[day1], [0, 1, 2])
    table = commit_files(table, [position], deletes=True)
    equality = equality_delete_file(table, files[day2].partition, "id", [2000, 2001])
    table = commit_files(table, [equality], deletes=True)
    return table, pyiceberg_wrote_deletes


def build_overwritten(catalog: SqlCatalog) -> Table:
    """(f) Files that are no longer live: a partial delete, a whole-partition delete, an overwrite."""
    table = catalog.create_table(f"{NAMESPACE}.overwritten", schema=_DATE_SCHEMA, partition_spec=_DATE_SPEC)
    for i in range(9):
        table.append(_date_rows(range(i * 100, i * 100 + 20), dt.date(2026, 10, 1 + i % 3)))
    table.delete(EqualTo("id", 5))  # rewrites one file of 2026-10-01
    table.delete(EqualTo("event_date", dt.date(2026, 10, 2)))  # drops the whole partition
    table.overwrite(
        _date_rows(range(5000, 5100), dt.date(2026, 10, 3)),
        overwrite_filter=GreaterThanOrEqual("event_date", dt.date(2026, 10, 3)),
    )
    table.append(_date_rows(range(6000, 6010), dt.date(2026, 10, 4)))
    return table.refresh()


def build_just_deleted(catalog: SqlCatalog) -> Table:
    """(g) The newest snapshot is a delete: its manifests still hold DELETED entries, which the
    profile must not count (a later fast append would drop those manifests and hide the case)."""
    table = catalog.create_table(f"{NAMESPACE}.just_deleted", schema=_DATE_SCHEMA, partition_spec=_DATE_SPEC)
    for i in range(6):
        table.append(_date_rows(range(i * 100, i * 100 + 20), dt.date(2026, 10, 1 + i % 2)))
    table.delete(EqualTo("event_date", dt.date(2026, 10, 2)))
    table = table.refresh()
    statuses = table.inspect.entries().column("status").to_pylist()
    assert 2 in statuses, "the scenario needs DELETED manifest entries in the current snapshot"
    return table


@dataclasses.dataclass
class Warehouse:
    """The session's sqlite catalog and its tables."""

    root: Path
    uri: str
    warehouse: str
    catalog: SqlCatalog
    tables: dict[str, Table]
    pyiceberg_wrote_deletes: bool

    def metadata_path(self, name: str) -> str:
        """Local path of the table's current metadata.json."""
        return local_path(self.tables[name].metadata_location)

    def table_dir(self, name: str) -> str:
        """Local path of the table's root directory."""
        return local_path(self.tables[name].location())


def local_path(uri: str) -> str:
    """``file:///x`` → ``/x``; other strings unchanged."""
    return uri[len("file://") :] if uri.startswith("file://") else uri


def build_warehouse(root: Path) -> Warehouse:
    """Creates the sqlite catalog under ``root`` and every scenario table."""
    root.mkdir(parents=True, exist_ok=True)
    uri = f"sqlite:///{root}/catalog.db"
    warehouse = f"file://{root}/warehouse"
    catalog = SqlCatalog(CATALOG_NAME, uri=uri, warehouse=warehouse)
    catalog.create_namespace(NAMESPACE)
    deletes_table, pyiceberg_wrote_deletes = build_with_deletes(catalog)
    tables = {
        "by_date": build_identity_date(catalog),
        "unpartitioned": build_unpartitioned(catalog),
        "day_bucket": build_day_bucket(catalog),
        "time_transforms": build_time_transforms(catalog),
        "evolved": build_evolved_spec(catalog),
        "with_deletes": deletes_table,
        "overwritten": build_overwritten(catalog),
        "just_deleted": build_just_deleted(catalog),
    }
    other = SqlCatalog(OTHER_CATALOG_NAME, uri=uri, warehouse=warehouse)
    other.create_namespace(NAMESPACE)
    other.register_table(f"{NAMESPACE}.by_date", tables["by_date"].metadata_location)
    return Warehouse(root, uri, warehouse, catalog, tables, pyiceberg_wrote_deletes)


@pytest.fixture(scope="session")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Warehouse:
    """Every scenario table, built once per session with pyiceberg on a sqlite catalog."""
    return build_warehouse(tmp_path_factory.mktemp("warehouse"))


def fresh_catalog(root: Path) -> SqlCatalog:
    """A new sqlite SQL catalog with the test namespace under `root` (created); its URI and root
    are kept as ``test_uri`` and ``test_root``."""
    root.mkdir(parents=True)
    uri = f"sqlite:///{root}/catalog.db"
    cat = SqlCatalog(CATALOG_NAME, uri=uri, warehouse=f"file://{root}/warehouse")
    cat.create_namespace(NAMESPACE)
    cat.test_uri = uri  # type: ignore[attr-defined]
    cat.test_root = root  # type: ignore[attr-defined]
    return cat


@pytest.fixture
def catalog(tmp_path: Path) -> SqlCatalog:
    """A fresh catalog per test (maintenance changes tables)."""
    return fresh_catalog(tmp_path / "catalog")


@pytest.fixture
def clean_catalog_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    """No PYICEBERG_* variables and an empty PYICEBERG_HOME / HOME, so only the test's config counts."""
    for key in list(os.environ):
        if key.startswith("PYICEBERG_"):
            monkeypatch.delenv(key)
    empty_home = tmp_path / "empty-home"
    empty_home.mkdir()
    monkeypatch.setenv("HOME", str(empty_home))
    return monkeypatch


# --------------------------------------------------------------------------- Apache Spark

# The session's one SparkSession and its Hadoop catalog's warehouse (test/integration/spark.py),
# defined here once so that every module shares them (fixtures imported into two test modules
# would be two fixtures: two warehouses behind one JVM's catalog).
from spark import spark, spark_warehouse  # noqa: E402, F401

# The Spark Connect server the Spark executor's tests hand rewrites to (test/integration/spark_connect.py).
from spark_connect import spark_connect, spark_connect_private  # noqa: E402, F401


# --------------------------------------------------------------------------- interpreter exit

_EXIT_STATUS: list[int] = []


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _EXIT_STATUS.append(int(exitstatus))


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """Leaves without the interpreter's native teardown: with deltalake 1.6.6 (its Tokio runtime)
    and duckdb 1.5.5 both imported, the teardown at exit aborts now and then ("terminate called
    without an active exception", exit 134) — reproduced with `import duckdb, deltalake` and one
    `DeltaTable(...).to_pyarrow_table()`, our extension not loaded. Everything pytest reports is
    written by now; the exit status is the session's."""
    if _EXIT_STATUS:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(_EXIT_STATUS[-1])
