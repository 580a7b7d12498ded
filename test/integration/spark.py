"""Apache Spark (with Iceberg's Spark runtime and Delta Lake's Spark connector) as an independent
writer and reader of Iceberg tables (test_spark_conformance.py, test_foreign_tables.py) and of
Delta tables (test_delta.py).

One local SparkSession per pytest session (fixture :func:`spark`), loopback only, no UI, with an
Iceberg Hadoop catalog named ``hc`` whose warehouse is a session temp directory: a table
``hc.<ns>.<name>`` lives in ``<warehouse>/<ns>/<name>`` as ``metadata/vN.metadata.json`` plus
``metadata/version-hint.text``, which the lakehouse extension opens by its directory.

Nothing is resolved over the network: the Iceberg runtime jar comes from the cache
``scripts/spark_jars.sh`` fills (``$LAKEHOUSE_JAR_CACHE``, default
``${XDG_CACHE_HOME:-~/.cache}/lakehouse/jars``). When pyspark, Java or the jar is missing the
fixture fails (not skips) with what to run.

Iceberg and Delta share the one session: Iceberg's tables live in the catalog ``hc``; Delta
tables are written and read by path (``spark.read.format("delta").load(path)``,
``delta.`/path```), through Delta's ``DeltaCatalog`` as the session catalog ``spark_catalog``
and both SQL extensions (``spark.sql.extensions`` lists Delta's, then Iceberg's: each parser
hands what it does not know to the one before it, so ``CALL hc.system.…``, ``ALTER TABLE … WRITE
ORDERED BY`` and ``VACUUM``/``DESCRIBE DETAIL``/``OPTIMIZE`` all parse).

conftest.py imports the fixtures once, so every test module shares one session and one warehouse
(importing them into each test module would define them once per module).
"""

from __future__ import annotations

import os
import shutil
import sys
import time
import urllib.parse
from pathlib import Path
from typing import Any, Iterable, Iterator

import pytest

PYSPARK_VERSION = "4.0.1"
ICEBERG_VERSION = "1.10.1"
DELTA_VERSION = "4.0.0"  # Delta Lake for Spark 4.0 (Scala 2.13)
# group:artifact:version — keep in step with ARTIFACTS in scripts/spark_jars.sh.
SPARK_JARS = [
    f"org.apache.iceberg:iceberg-spark-runtime-4.0_2.13:{ICEBERG_VERSION}",
    # Iceberg's JDBC catalog on sqlite (the catalog pyiceberg's SqlCatalog writes), for make bench.
    "org.xerial:sqlite-jdbc:3.50.3.0",
    # Delta Lake's Spark connector and the one dependency of it Spark does not ship.
    f"io.delta:delta-spark_2.13:{DELTA_VERSION}",
    f"io.delta:delta-storage:{DELTA_VERSION}",
    # Iceberg's S3FileIO and the AWS SDK it needs (tables on S3 behind a REST catalog).
    f"org.apache.iceberg:iceberg-aws-bundle:{ICEBERG_VERSION}",
]

ICEBERG_EXTENSIONS = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
DELTA_EXTENSIONS = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"

CATALOG = "hc"
NAMESPACE = "ns"

# Seconds the JVM and the SparkSession took to start (reported at the end of the session).
STARTUP: dict[str, float] = {}


def jar_cache() -> Path:
    """Where scripts/spark_jars.sh puts the jars."""
    if os.environ.get("LAKEHOUSE_JAR_CACHE"):
        return Path(os.environ["LAKEHOUSE_JAR_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "lakehouse" / "jars"


def jar_paths() -> list[Path]:
    """Local paths of the jars in SPARK_JARS; fails the test with the fix when one is missing."""
    paths = []
    for coordinate in SPARK_JARS:
        _, artifact, version = coordinate.split(":")
        path = jar_cache() / f"{artifact}-{version}.jar"
        if not path.is_file() or path.stat().st_size == 0:
            pytest.fail(
                f"Spark conformance tests need {coordinate} at {path}: run scripts/spark_jars.sh "
                "(set LAKEHOUSE_JAR_CACHE to use another cache directory)",
                pytrace=False,
            )
        paths.append(path)
    return paths


def _require_pyspark() -> Any:
    try:
        import pyspark
    except ImportError as err:
        missing = str(err)
    else:
        missing = ""
    if missing:
        pytest.fail(
            f"Spark conformance tests need pyspark=={PYSPARK_VERSION} in this Python ({sys.executable}): "
            f"{sys.executable} -m pip install -r test/requirements-spark.txt ({missing})",
            pytrace=False,
        )
    # A benchmark may run another 4.0 patch release (bench/bench_delta_purge.py: the Spark Delta
    # 4.0.0 was built for), saying so in LAKEHOUSE_PYSPARK_VERSION.
    if pyspark.__version__ != os.environ.get("LAKEHOUSE_PYSPARK_VERSION", PYSPARK_VERSION):
        pytest.fail(
            f"Spark conformance tests are pinned to pyspark=={PYSPARK_VERSION} (Iceberg's runtime jar is "
            f"built for Spark 4.0 / Scala 2.13), found {pyspark.__version__}",
            pytrace=False,
        )
    if not os.environ.get("JAVA_HOME") and shutil.which("java") is None:
        pytest.fail("Spark conformance tests need Java 17+ (java on PATH or JAVA_HOME)", pytrace=False)
    return pyspark


def session_builder(
    scratch: Path, app_name: str, driver_memory: str = "1g", quick_jvm: bool = True, delta: bool = False
) -> Any:
    """A SparkSession builder for local[2] (loopback only, no UI, UTC) with Iceberg's runtime and
    SQL extensions from the jar cache; Spark's scratch space (and Ivy, which is never used) under
    ``scratch``. Callers add their catalogs. ``quick_jvm`` (tests) trades peak speed for start-up
    (C1 JIT only, serial GC); benchmarks pass False and get the JVM's defaults. ``delta`` adds
    Delta Lake: its SQL extensions before Iceberg's, and ``DeltaCatalog`` as ``spark_catalog``
    (Delta tables by path; Iceberg's catalogs are unaffected)."""
    _require_pyspark()
    from pyspark.sql import SparkSession

    jars = ",".join(str(p) for p in jar_paths())
    scratch.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    builder = (
        SparkSession.builder.master("local[2]")
        .appName(app_name)
        .config("spark.jars", jars)
        .config("spark.jars.ivy", str(scratch / "ivy"))
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.local.dir", str(scratch))
        .config("spark.sql.warehouse.dir", str(scratch / "spark-warehouse"))
        .config("spark.driver.memory", driver_memory)
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.adaptive.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config(
            "spark.driver.extraJavaOptions",
            "-Duser.timezone=UTC" + (" -XX:+UseSerialGC -XX:TieredStopAtLevel=1" if quick_jvm else ""),
        )
        .config("spark.sql.extensions", f"{DELTA_EXTENSIONS},{ICEBERG_EXTENSIONS}" if delta else ICEBERG_EXTENSIONS)
    )
    if delta:
        builder = (
            builder.config("spark.sql.catalog.spark_catalog", DELTA_CATALOG)
            # No automatic compaction or optimized writes (off by default in open-source Delta;
            # said here because tests count the files each write leaves).
            .config("spark.databricks.delta.autoCompact.enabled", "false")
            .config("spark.databricks.delta.optimizeWrite.enabled", "false")
            # Delta's VACUUM lists the table in this many tasks (default 10,000: minutes of task
            # overhead on local[2] for a table of a few hundred files).
            .config("spark.sql.sources.parallelPartitionDiscovery.parallelism", "4")
            # Snapshot state reconstruction in 50 shuffle partitions by default; 2 cores here.
            .config("spark.databricks.delta.snapshotPartitions", "2")
        )
    return builder


def new_spark_session(warehouse: Path, app_name: str = "lakehouse-spark-conformance"):
    """A local[2] SparkSession with the Iceberg extensions and the Hadoop catalog ``hc``, and Delta
    Lake (tables by path)."""
    builder = (
        session_builder(warehouse.parent / "spark-local", app_name, delta=True)
        .config(f"spark.sql.catalog.{CATALOG}", "org.apache.iceberg.spark.SparkCatalog")
        .config(f"spark.sql.catalog.{CATALOG}.type", "hadoop")
        .config(f"spark.sql.catalog.{CATALOG}.warehouse", str(warehouse))
        # Every statement sees the table as it is on disk now (the extension commits behind Spark's back).
        .config(f"spark.sql.catalog.{CATALOG}.cache-enabled", "false")
    )
    started = time.monotonic()
    session = builder.getOrCreate()
    STARTUP["jvm_and_session_s"] = time.monotonic() - started
    session.sparkContext.setLogLevel("ERROR")
    session.sql(f"CREATE NAMESPACE IF NOT EXISTS {CATALOG}.{NAMESPACE}")
    return session


@pytest.fixture(scope="session")
def spark_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Hadoop catalog's warehouse directory."""
    return tmp_path_factory.mktemp("spark") / "warehouse"


@pytest.fixture(scope="session")
def spark(spark_warehouse: Path, request: pytest.FixtureRequest) -> Iterator[Any]:
    """The session's one SparkSession (stopped at the end of the pytest session)."""
    session = new_spark_session(spark_warehouse)
    yield session
    session.stop()
    report(request, f"spark: JVM + SparkSession started in {STARTUP['jvm_and_session_s']:.1f}s")


def report(request: pytest.FixtureRequest, line: str) -> None:
    """Writes a line to the terminal from a fixture teardown (past pytest's output capture)."""
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is None:
        return
    if capture is not None:
        with capture.global_and_fixture_disabled():
            reporter.ensure_newline()
            reporter.write_line(line)
    else:
        reporter.ensure_newline()
        reporter.write_line(line)


# --------------------------------------------------------------------------- helpers


class SparkTables:
    """Helpers around the Hadoop catalog of one SparkSession."""

    def __init__(self, spark: Any, warehouse: Path) -> None:
        self.spark = spark
        self.warehouse = warehouse
        self.jvm = spark._jvm

    def ident(self, name: str) -> str:
        return f"{CATALOG}.{NAMESPACE}.{name}"

    def table_dir(self, name: str) -> Path:
        return self.warehouse / NAMESPACE / name

    def sql(self, statement: str) -> list[Any]:
        return self.spark.sql(statement).collect()

    def rows(self, df_or_name: Any, columns: Iterable[str] | None = None) -> list[tuple]:
        """Every row as a sorted list of plain tuples (nested rows, lists and maps made hashable)."""
        df = self.spark.table(self.ident(df_or_name)) if isinstance(df_or_name, str) else df_or_name
        if columns is not None:
            df = df.select(*columns)
        return sorted((plain(r) for r in df.collect()), key=repr)

    def java_table(self, name: str) -> Any:
        """The org.apache.iceberg.Table behind ``hc.ns.<name>``, freshly loaded."""
        return self.jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(self.spark._jsparkSession, self.ident(name))

    def file_labels(self, name: str) -> dict[str, tuple[int, str]]:
        """path -> (spec id, partition label as Java's PartitionSpec.partitionToPath prints it,
        unescaped) for every live data and delete file of the current snapshot."""
        jt = self.java_table(name)
        snapshot = jt.currentSnapshot()
        out: dict[str, tuple[int, str]] = {}
        if snapshot is None:
            return out
        io, specs = jt.io(), jt.specs()
        manifest_files = self.jvm.org.apache.iceberg.ManifestFiles
        for manifest in snapshot.allManifests(io):
            if manifest.content().name() == "DATA":
                reader = manifest_files.read(manifest, io, specs)
            else:
                reader = manifest_files.readDeleteManifest(manifest, io, specs)
            iterator = reader.iterator()
            try:
                while iterator.hasNext():
                    content_file = iterator.next()
                    spec = specs.get(content_file.specId())
                    out[content_file.location()] = (content_file.specId(), human_path(spec.partitionToPath(content_file.partition())))
            finally:
                iterator.close()
                reader.close()
        return out


def local_path(uri: str) -> str:
    """``file:/x`` / ``file:///x`` -> ``/x``; other strings unchanged."""
    if uri.startswith("file://"):
        return uri[len("file://") :]
    if uri.startswith("file:"):
        return uri[len("file:") :]
    return uri


def human_path(path: str) -> str:
    """Java's partitionToPath joins ``escape(name)=escape(human value)`` with ``/`` (escape is
    URLEncoder.encode); undo the escaping so the label reads as Transform.toHumanString prints."""
    if path == "":
        return "(unpartitioned)"
    parts = []
    for part in path.split("/"):
        name, _, value = part.partition("=")
        parts.append(f"{urllib.parse.unquote_plus(name)}={urllib.parse.unquote_plus(value)}")
    return "/".join(parts)


def plain(value: Any) -> Any:
    """Spark Rows, lists, dicts and bytearrays as hashable, comparable values."""
    from pyspark.sql import Row

    if isinstance(value, Row):
        return tuple(plain(v) for v in value)
    if isinstance(value, (list, tuple)):
        return tuple(plain(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted(((plain(k), plain(v)) for k, v in value.items()), key=repr))
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, float) and value != value:
        return "NaN"
    return value
