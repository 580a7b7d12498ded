"""A Spark Connect server (Apache Spark 4.0 with Iceberg's Spark runtime) as a child process, for
the tests of the executor that sends ``CALL <catalog>.system.rewrite_data_files(...)`` over the
Spark Connect gRPC protocol.

The server is the pyspark package's own ``bin/spark-submit`` running
``org.apache.spark.sql.connect.service.SparkConnectServer`` (``pyspark/jars`` ships
``spark-connect_2.13-<version>.jar``): ``local[2]``, gRPC bound to 127.0.0.1 on a free port, no UI,
UTC, Spark's scratch space in a pytest temp directory, the jars of spark.py's jar cache
(``scripts/spark_jars.sh``), Iceberg's SQL extensions (so ``CALL`` parses) and Delta Lake's (so
``OPTIMIZE delta.`<path>``` parses; Delta's ``DeltaCatalog`` is the session catalog).

Its one Iceberg catalog (``CATALOG``, ``sc``) is Iceberg's JDBC catalog on a sqlite file, cache
off (every statement sees what the extension committed behind the server's back). Java names its
rows (column ``catalog_name``) by the Spark catalog's name, so the pyiceberg ``SqlCatalog``
(:func:`sql_catalog`) and the extension (``catalog := 'sc', catalog_uri := 'sqlite:///<path>'``)
use that same name.

The sqlite file gets Java's *V0* catalog schema (no ``iceberg_type`` column; pyiceberg 0.12 runs
in its v0 mode on it) before any JVM opens it, and every JVM's catalog has
``jdbc.init-catalog-tables=false``. Reason: Iceberg 1.10.1's ``JdbcCatalog.initialize`` probes
``DatabaseMetaData.getTables`` (for each catalog table) and ``getColumns(iceberg_type)`` and never
closes those ResultSets; with sqlite-jdbc a ResultSet left on a row keeps its statement active,
so the JVM holds a SHARED lock on the file for as long as it lives and every other writer
(pyiceberg, the extension, another JVM) fails with "database is locked". The probes find nothing
(no lock) only when the tables are not created by initialize() and there is no ``iceberg_type``
column. (WAL mode is no cure: the dangling statement would pin that connection to a stale
snapshot of the catalog.)

Fixtures:

* :func:`spark_connect` — the session's one server, started on first use and stopped (by its
  process group) at the end of the pytest session;
* :func:`spark_connect_private` — a server of the test's own (another JVM start, ~4-5 s here), for
  tests that stop or kill it midway ("Spark down"); stopped at the end of the test if still up. A
  test that only needs a URL nobody answers can use :func:`unused_url` instead (no JVM).

Rows are checked through the classic PySpark session of spark.py (fixture ``spark``), which gets
the same JDBC catalog at run time (:func:`attach_catalog`). Nothing here needs pip packages
beyond spark.py's: the tests never use PySpark's Connect client (which needs grpcio, pandas,
pyarrow, ...). When pyspark, Java or a jar is missing the fixtures fail (not skip) with what to run.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from spark import DELTA_CATALOG, DELTA_EXTENSIONS, ICEBERG_EXTENSIONS, NAMESPACE, _require_pyspark, jar_paths, report
from loopback import free_port

CATALOG = "sc"
SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
JDBC_CATALOG_IMPL = "org.apache.iceberg.spark.SparkCatalog"
START_TIMEOUT_S = 240.0
STOP_TIMEOUT_S = 30.0
LOG_TAIL_LINES = 40

# Seconds each server took from spark-submit to an open gRPC port (reported at the end).
STARTUP: list[float] = []


@dataclasses.dataclass
class SparkConnectServer:
    """One Spark Connect server process and the Iceberg catalog it serves."""

    process: subprocess.Popen
    port: int
    workdir: Path
    log_path: Path
    sqlite_path: Path
    warehouse: Path
    catalog: str
    startup_s: float

    @property
    def url(self) -> str:
        """The Spark Connect URL, ``sc://127.0.0.1:<port>``."""
        return f"sc://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def sqlite_uri(self) -> str:
        """The catalog as pyiceberg's SqlCatalog (and the extension's ``catalog_uri``) names it."""
        return f"sqlite:///{self.sqlite_path}"

    @property
    def jdbc_uri(self) -> str:
        return f"jdbc:sqlite:{self.sqlite_path}"

    @property
    def warehouse_uri(self) -> str:
        return f"file://{self.warehouse}"

    def ident(self, name: str, namespace: str = NAMESPACE) -> str:
        """``sc.<namespace>.<name>``, the table's name on the server."""
        return f"{self.catalog}.{namespace}.{name}"

    def alive(self) -> bool:
        return self.process.poll() is None

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        """SIGTERM to the server's process group (Spark stops its context), SIGKILL after
        STOP_TIMEOUT_S; waits for the process. Idempotent."""
        self._signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        """SIGKILL to the server's process group (a crash: no shutdown hooks); waits for it."""
        self._signal(signal.SIGKILL)
        self.process.wait()

    def _signal(self, sig: signal.Signals) -> None:
        # The server is the leader of its own process group (start_new_session): the group is
        # spark-submit's shell, if it has not exec'ed yet, and the JVM.
        try:
            os.killpg(self.process.pid, sig)
        except ProcessLookupError:
            pass



def unused_url() -> str:
    """A Spark Connect URL nothing answers at (connection refused), for "Spark is down" tests
    that need no server of their own."""
    return f"sc://127.0.0.1:{free_port()}"


def spark_submit() -> Path:
    """``<pyspark>/bin/spark-submit`` of the pinned pyspark; fails the test when pyspark, Java or
    the Connect server jar is missing."""
    pyspark = _require_pyspark()
    home = Path(pyspark.__file__).resolve().parent
    script = home / "bin" / "spark-submit"
    connect_jar = home / "jars" / f"spark-connect_2.13-{pyspark.__version__}.jar"
    if not script.is_file() or not connect_jar.is_file():
        pytest.fail(
            f"Spark Connect tests need the pyspark pip package's {script} and {connect_jar}: "
            f"{sys.executable} -m pip install --force-reinstall -r test/requirements-spark.txt",
            pytrace=False,
        )
    return script


# Iceberg 1.10.1's JdbcUtil.V0_CREATE_CATALOG_SQL and CREATE_NAMESPACE_PROPERTIES_TABLE_SQL.
JDBC_V0_SCHEMA = [
    "CREATE TABLE IF NOT EXISTS iceberg_tables(catalog_name VARCHAR(255) NOT NULL,"
    "table_namespace VARCHAR(255) NOT NULL,table_name VARCHAR(255) NOT NULL,"
    "metadata_location VARCHAR(1000),previous_metadata_location VARCHAR(1000),"
    "PRIMARY KEY (catalog_name, table_namespace, table_name))",
    "CREATE TABLE IF NOT EXISTS iceberg_namespace_properties(catalog_name VARCHAR(255) NOT NULL,"
    "namespace VARCHAR(255) NOT NULL,property_key VARCHAR(255),property_value VARCHAR(1000),"
    "PRIMARY KEY (catalog_name, namespace, property_key))",
]


def create_catalog_db(sqlite_path: Path, catalog: str = CATALOG, namespace: str = NAMESPACE) -> None:
    """The sqlite catalog with Java's V0 schema (see the module docstring) and ``namespace``."""
    import sqlite3

    con = sqlite3.connect(sqlite_path)
    try:
        with con:
            for statement in JDBC_V0_SCHEMA:
                con.execute(statement)
            con.execute(
                "INSERT OR IGNORE INTO iceberg_namespace_properties VALUES (?, ?, 'exists', 'true')", (catalog, namespace)
            )
    finally:
        con.close()


def sql_catalog(sqlite_path: Path, warehouse: Path, name: str = CATALOG) -> Any:
    """pyiceberg's SqlCatalog on the server's sqlite file, under the name Java's JdbcCatalog
    writes in ``catalog_name`` (the Spark catalog's name); v0 mode (no ``iceberg_type``)."""
    from pyiceberg.catalog.sql import SqlCatalog

    # (pyiceberg logs a warning that it found a v0 schema: it is meant to be one.)
    return SqlCatalog(name, uri=f"sqlite:///{sqlite_path}", warehouse=f"file://{warehouse}", init_catalog_tables="false")


def catalog_conf(catalog: str, sqlite_path: Path, warehouse: Path) -> dict[str, str]:
    """Spark configuration of Iceberg's JDBC catalog ``catalog`` on the sqlite file, cache off."""
    prefix = f"spark.sql.catalog.{catalog}"
    return {
        prefix: JDBC_CATALOG_IMPL,
        f"{prefix}.type": "jdbc",
        f"{prefix}.uri": f"jdbc:sqlite:{sqlite_path}",
        f"{prefix}.warehouse": f"file://{warehouse}",
        f"{prefix}.cache-enabled": "false",
        # The tables are there (create_catalog_db); initialize() would leave a lock behind.
        f"{prefix}.jdbc.init-catalog-tables": "false",
    }


def attach_catalog(session: Any, server: SparkConnectServer, name: str | None = None) -> str:
    """Adds the server's JDBC catalog to a classic SparkSession (spark.py's ``spark``) at run
    time, as ``name`` (default: the server's catalog name, so the same rows of the sqlite file);
    returns the name. Spark loads a catalog on its first use, so setting its configuration later
    is enough."""
    name = name or server.catalog
    for key, value in catalog_conf(name, server.sqlite_path, server.warehouse).items():
        session.conf.set(key, value)
    return name


def start_server(
    workdir: Path,
    catalog: str = CATALOG,
    timeout_s: float = START_TIMEOUT_S,
    driver_memory: str = "1g",
    quick_jvm: bool = True,
) -> SparkConnectServer:
    """Starts a Spark Connect server with the JDBC catalog ``catalog`` on ``workdir/catalog.db``
    (warehouse ``workdir/warehouse``, namespace NAMESPACE created) and waits until its port
    accepts connections; fails the test with the server log's tail when it does not within
    ``timeout_s``. ``quick_jvm`` (tests) trades peak speed for start-up (C1 JIT only, serial GC);
    benchmarks pass False and get the JVM's defaults, as spark.py's ``session_builder``."""
    script = spark_submit()
    jars = ",".join(str(p) for p in jar_paths())
    workdir.mkdir(parents=True, exist_ok=True)
    scratch = workdir / "spark-local"
    scratch.mkdir(exist_ok=True)
    warehouse = workdir / "warehouse"
    warehouse.mkdir(exist_ok=True)
    sqlite_path = workdir / "catalog.db"
    create_catalog_db(sqlite_path, catalog)

    port = free_port()
    conf = {
        "spark.master": "local[2]",
        "spark.app.name": "lakehouse-spark-connect",
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
        "spark.jars": jars,
        "spark.jars.ivy": str(scratch / "ivy"),
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.local.dir": str(scratch),
        "spark.sql.warehouse.dir": str(scratch / "spark-warehouse"),
        "spark.driver.memory": driver_memory,
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.sql.adaptive.enabled": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.extraJavaOptions": "-Duser.timezone=UTC"
        + (" -XX:+UseSerialGC -XX:TieredStopAtLevel=1" if quick_jvm else ""),
        # Delta's extension too (the executor sends Delta tables ``OPTIMIZE delta.`<path>```), and
        # Delta's catalog as the session catalog, as Delta's docs configure it.
        "spark.sql.extensions": f"{DELTA_EXTENSIONS},{ICEBERG_EXTENSIONS}",
        "spark.sql.catalog.spark_catalog": DELTA_CATALOG,
        "spark.databricks.delta.snapshotPartitions": "2",
        **catalog_conf(catalog, sqlite_path, warehouse),
    }
    command = [str(script), "--class", SERVER_CLASS, "--name", "lakehouse-spark-connect"]
    for key, value in conf.items():
        command += ["--conf", f"{key}={value}"]
    env = dict(os.environ)
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    env["SPARK_LOG_DIR"] = str(workdir)
    env["PYSPARK_PYTHON"] = sys.executable
    env.pop("SPARK_HOME", None)  # bin/find-spark-home: the pip package's own directory
    log_path = workdir / "server.log"
    started = time.monotonic()
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=workdir, env=env, start_new_session=True
        )
    server = SparkConnectServer(process, port, workdir, log_path, sqlite_path, warehouse, catalog, 0.0)
    try:
        wait_for_port(server, timeout_s)
    except BaseException:
        server.kill()
        raise
    server.startup_s = time.monotonic() - started
    STARTUP.append(server.startup_s)
    return server


def wait_for_port(server: SparkConnectServer, timeout_s: float) -> None:
    """Polls until the server's gRPC port accepts a TCP connection; fails with the log's tail when
    the process exits or ``timeout_s`` passes."""
    deadline = time.monotonic() + timeout_s
    while True:
        if not server.alive():
            pytest.fail(
                f"Spark Connect server exited with {server.process.returncode} before opening port {server.port}; "
                f"{server.log_path}:\n{server.log_tail()}",
                pytrace=False,
            )
        try:
            with socket.create_connection(("127.0.0.1", server.port), timeout=1.0):
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            pytest.fail(
                f"Spark Connect server (pid {server.pid}) did not accept connections on 127.0.0.1:{server.port} "
                f"within {timeout_s:.0f}s; {server.log_path}:\n{server.log_tail()}",
                pytrace=False,
            )
        time.sleep(0.25)


@pytest.fixture(scope="session")
def spark_connect(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[SparkConnectServer]:
    """The session's one Spark Connect server (catalog ``sc``); stopped at the end."""
    server = start_server(tmp_path_factory.mktemp("spark-connect"))
    yield server
    server.stop()
    report(request, f"spark-connect: server started in {server.startup_s:.1f}s (pid {server.pid}, {server.url})")


@pytest.fixture
def spark_connect_private(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[SparkConnectServer]:
    """A server (and sqlite catalog) of this test's own, which the test may stop() or kill();
    stopped at the end of the test if still up."""
    server = start_server(tmp_path / "spark-connect")
    yield server
    server.stop()
    report(request, f"spark-connect (private): server started in {server.startup_s:.1f}s")
