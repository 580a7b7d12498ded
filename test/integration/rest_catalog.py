"""A real Iceberg REST catalog for the integration tests: Apache Iceberg's own REST catalog test
fixture (``org.apache.iceberg:iceberg-open-api:1.10.1:test-fixtures``, the server behind the
``apache/iceberg-rest-fixture`` image), run as a JVM on loopback and stopped by PID.

Backend: Iceberg's ``JdbcCatalog`` on a sqlite file in the work directory (``catalog.db``), table
metadata and data on S3 through ``S3FileIO`` (path-style, the given endpoint and keys). The jars
come from ``scripts/rest_catalog.sh`` (a Maven-resolved cache outside the repository; run once per
machine, fast when warm), launched through ``LoopbackRESTCatalogServer`` (scripts/rest_catalog/):
the fixture's server bound to 127.0.0.1 on a port the kernel picks (no race for a free port).

What the server does (checked with 1.10.1):
- ``GET /v1/config`` → ``{"defaults": {}, "overrides": {}, "endpoints": [...]}``: no prefix, no
  defaults; clients must bring their own S3 properties (:meth:`RestCatalogServer.client_properties`).
- A failed ``assert-*`` requirement on ``POST /v1/namespaces/{ns}/tables/{t}`` → HTTP 409
  ``{"error": {"message": "Requirement failed: branch main has changed: expected id A != B",
  "type": "CommitFailedException", "code": 409, "stack": [...]}}`` (404: ``NoSuchTableException``).
- ``LoadTable`` has no ``config`` key (nor ``storage-credentials``), whatever
  ``X-Iceberg-Access-Delegation`` says; with ``include_credentials=True`` it has
  ``"config": {"s3.access-key-id": ..., "s3.secret-access-key": ...}`` (never the endpoint).
- Clients: pyiceberg :func:`pyiceberg_catalog`; DuckDB ``ATTACH 'warehouse' AS cat (TYPE iceberg,
  ENDPOINT '<uri>', AUTHORIZATION_TYPE 'none')`` plus an s3 secret (reads, INSERT, CREATE TABLE);
  Spark ``type=rest``, ``io-impl=S3FileIO``, the :func:`s3_client_properties` keys with
  ``client.region``, and :func:`aws_bundle_jar` in ``spark.jars``.

Plain classes and functions (no pytest here); the fixtures that use them live in conftest.py.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Mapping

ICEBERG_VERSION = "1.10.1"
REPO_ROOT = Path(__file__).resolve().parents[2]
RESOLVE_SCRIPT = REPO_ROOT / "scripts" / "rest_catalog.sh"
MAIN_CLASS = "org.apache.iceberg.rest.LoopbackRESTCatalogServer"
S3_FILE_IO = "org.apache.iceberg.aws.s3.S3FileIO"
HOST = "127.0.0.1"
# Startup takes ~1.5 s; the first run of scripts/rest_catalog.sh (Maven) is not counted here.
START_TIMEOUT_S = 60.0
# C1 JIT only and the serial GC: quicker start, smaller footprint; plenty for a test catalog.
DEFAULT_JVM_OPTIONS = ("-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss512k")

_listening = re.compile(r"LoopbackRESTCatalogServer listening on http://[0-9.]+:(\d+)")
_classpath_dir: Path | None = None


def classpath_dir() -> Path:
    """The directory of the fixture's jars (``<dir>/*`` is the classpath), from
    scripts/rest_catalog.sh (resolves them with Maven the first time; ~30 ms when warm)."""
    global _classpath_dir
    if _classpath_dir is None:
        result = subprocess.run(
            ["bash", str(RESOLVE_SCRIPT)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        if result.returncode != 0:
            raise RuntimeError(
                f"{RESOLVE_SCRIPT} failed (exit {result.returncode}); it needs Java 11+, Maven and "
                f"Maven Central (or a warm cache):\n{result.stderr[-4000:]}"
            )
        path = Path(result.stdout.strip().splitlines()[-1])
        if not path.is_dir():
            raise RuntimeError(f"{RESOLVE_SCRIPT} printed {path!r}, which is not a directory")
        _classpath_dir = path
    return _classpath_dir


def aws_bundle_jar() -> Path:
    """iceberg-aws-bundle (the shaded AWS SDK S3FileIO needs), placed by scripts/rest_catalog.sh
    next to the Spark jars of scripts/spark_jars.sh: add it to ``spark.jars`` for S3FileIO."""
    return classpath_dir().parent / f"iceberg-aws-bundle-{ICEBERG_VERSION}.jar"


def java_executable() -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").is_file():
        return str(Path(java_home) / "bin" / "java")
    java = shutil.which("java")
    if java is None:
        raise RuntimeError("the Iceberg REST catalog needs Java 11+ (java on PATH or JAVA_HOME)")
    return java


def catalog_env_name(prop: str) -> str:
    """The fixture reads catalog properties from ``CATALOG_*`` variables: ``-`` is spelled ``__``,
    ``.`` is ``_`` (so a property with ``_`` in its name cannot be given)."""
    if "_" in prop:
        raise ValueError(f"catalog property {prop!r} has '_': the fixture's CATALOG_* variables cannot express it")
    return "CATALOG_" + prop.replace("-", "__").replace(".", "_").upper()


def s3_client_properties(
    s3_endpoint: str, access_key: str, secret_key: str, region: str = "us-east-1"
) -> dict[str, str]:
    """S3FileIO / pyiceberg FileIO properties for a path-style endpoint ``http://host:port``."""
    return {
        "s3.endpoint": s3_endpoint,
        "s3.access-key-id": access_key,
        "s3.secret-access-key": secret_key,
        "s3.region": region,
        "s3.path-style-access": "true",
    }


def pyiceberg_catalog(
    name: str,
    uri: str,
    s3_endpoint: str,
    access_key: str,
    secret_key: str,
    region: str = "us-east-1",
    **properties: str,
) -> Any:
    """A pyiceberg ``RestCatalog`` on the server at ``uri`` whose FileIO reads and writes the
    tables' S3 files at ``s3_endpoint`` with the given keys. Extra ``properties`` are passed as is."""
    from pyiceberg.catalog.rest import RestCatalog

    props = {"uri": uri, **s3_client_properties(s3_endpoint, access_key, secret_key, region), **properties}
    return RestCatalog(name, **props)


class RestCatalogServer:
    """Iceberg's REST catalog fixture as a child JVM on 127.0.0.1; :meth:`start`, :attr:`uri`,
    :meth:`stop` (by PID). Also a context manager."""

    def __init__(self, jvm_options: tuple[str, ...] | list[str] = DEFAULT_JVM_OPTIONS) -> None:
        self.jvm_options = list(jvm_options)
        self.process: subprocess.Popen | None = None
        self.port: int | None = None
        self.workdir: Path | None = None
        self.log_path: Path | None = None
        self.startup_s: float | None = None
        self.warehouse: str | None = None
        self.s3: dict[str, str] = {}

    # -- lifecycle ---------------------------------------------------------------------------

    def start(
        self,
        workdir: str | os.PathLike,
        warehouse: str = "s3://bucket/warehouse",
        s3_endpoint: str = "",
        access_key: str = "",
        secret_key: str = "",
        region: str = "us-east-1",
        *,
        port: int = 0,
        include_credentials: bool = False,
        extra_properties: Mapping[str, str] | None = None,
        timeout: float = START_TIMEOUT_S,
    ) -> "RestCatalogServer":
        """Starts the server and waits until ``GET /v1/config`` answers 200. ``workdir`` holds
        ``catalog.db`` (the sqlite catalog: reusing a workdir keeps the catalog across restarts)
        and ``rest-catalog.log``. ``s3_endpoint`` is ``http://127.0.0.1:PORT`` (path-style; the
        bucket must exist). ``port=0``: the kernel picks a free port. ``include_credentials``: LoadTable
        responses carry the S3 key pair in ``config``. ``extra_properties``: more catalog properties."""
        if self.process is not None:
            raise RuntimeError(f"REST catalog already running (pid {self.process.pid})")
        if not s3_endpoint:
            raise ValueError("s3_endpoint is required (http://127.0.0.1:PORT of the S3 server)")
        workdir = Path(workdir)
        workdir.mkdir(parents=True, exist_ok=True)
        self.workdir = workdir
        self.log_path = workdir / "rest-catalog.log"
        self.warehouse = warehouse
        self.s3 = s3_client_properties(s3_endpoint, access_key, secret_key, region)

        props = {
            "catalog-impl": "org.apache.iceberg.jdbc.JdbcCatalog",
            "uri": f"jdbc:sqlite:{workdir.resolve() / 'catalog.db'}",
            # One sqlite connection: commits are serialized, no SQLITE_BUSY under concurrent clients.
            "clients": "1",
            "warehouse": warehouse,
            "io-impl": S3_FILE_IO,
            "s3.endpoint": s3_endpoint,
            "s3.path-style-access": "true",
            "s3.access-key-id": access_key,
            "s3.secret-access-key": secret_key,
            "client.region": region,
            "rest.host": HOST,
            "rest.port": str(port),
        }
        if include_credentials:
            props["include-credentials"] = "true"
        props.update(extra_properties or {})

        # Nothing from the caller's environment leaks into the catalog (CATALOG_*) or the AWS SDK.
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CATALOG_", "AWS_"))}
        env.update({catalog_env_name(k): v for k, v in props.items()})
        env.update({"AWS_REGION": region, "AWS_EC2_METADATA_DISABLED": "true"})

        cmd = [java_executable(), *self.jvm_options, "-cp", str(classpath_dir() / "*"), MAIN_CLASS]
        started = time.monotonic()
        # The log is appended to across restarts in one workdir: look for this run's lines only.
        log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        log = open(self.log_path, "ab")
        try:
            self.process = subprocess.Popen(
                cmd, cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        finally:
            log.close()
        atexit.register(self.stop)
        try:
            self.port = self._wait_for_port(started + timeout, log_offset)
            self._wait_ready(started + timeout)
        except BaseException:
            self.stop()
            raise
        self.startup_s = time.monotonic() - started
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM to the JVM's PID (Jetty stops gracefully), SIGKILL after ``timeout``. Idempotent."""
        process, self.process = self.process, None
        if process is None:
            return
        atexit.unregister(self.stop)
        if process.poll() is None:
            try:
                os.kill(process.pid, signal.SIGTERM)
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                os.kill(process.pid, signal.SIGKILL)
                process.wait()
            except ProcessLookupError:
                pass
        self.port = None

    def __enter__(self) -> "RestCatalogServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- what clients need -------------------------------------------------------------------

    @property
    def pid(self) -> int:
        return self._running().pid

    @property
    def uri(self) -> str:
        """``http://127.0.0.1:PORT`` (the REST API is under ``/v1``, no prefix)."""
        self._running()
        return f"http://{HOST}:{self.port}"

    def client_properties(self) -> dict[str, str]:
        """Catalog properties for a client (pyiceberg, Spark's RESTCatalog with S3FileIO)."""
        return {"uri": self.uri, **self.s3}

    def pyiceberg_catalog(self, name: str = "rest", **properties: str) -> Any:
        return pyiceberg_catalog(
            name, self.uri, self.s3["s3.endpoint"], self.s3["s3.access-key-id"],
            self.s3["s3.secret-access-key"], self.s3["s3.region"], **properties,
        )

    def rss_bytes(self) -> int:
        """Resident memory of the JVM (Linux)."""
        with open(f"/proc/{self.pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        raise RuntimeError("no VmRSS")

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:] if self.log_path else ""
        except OSError:
            return ""

    # -- internals ---------------------------------------------------------------------------

    def _running(self) -> subprocess.Popen:
        if self.process is None or self.port is None:
            raise RuntimeError("REST catalog not running")
        return self.process

    def _died(self) -> RuntimeError:
        return RuntimeError(
            f"REST catalog exited with {self.process.returncode} while starting; log {self.log_path}:\n"
            f"{self.log_tail()}"
        )

    def _wait_for_port(self, deadline: float, log_offset: int) -> int:
        """The port from the launcher's "listening on" line (printed once Jetty is bound)."""
        assert self.process is not None and self.log_path is not None
        while True:
            with open(self.log_path, "rb") as log:
                log.seek(log_offset)
                match = _listening.search(log.read().decode(errors="replace"))
            if match:
                return int(match.group(1))
            if self.process.poll() is not None:
                raise self._died()
            if time.monotonic() > deadline:
                raise TimeoutError(f"REST catalog did not start listening in time; log:\n{self.log_tail()}")
            time.sleep(0.05)

    def _wait_ready(self, deadline: float) -> None:
        url = f"http://{HOST}:{self.port}/v1/config"
        last: object = None
        while True:
            if self.process.poll() is not None:
                raise self._died()
            try:
                with urllib.request.urlopen(url, timeout=2) as response:
                    if response.status == 200:
                        json.load(response)
                        return
                    last = response.status
            except (urllib.error.URLError, OSError, ValueError) as err:
                last = err
            if time.monotonic() > deadline:
                raise TimeoutError(f"GET {url} not ready in time ({last}); log:\n{self.log_tail()}")
            time.sleep(0.05)
