"""A REST catalog cannot redirect the user's own S3 traffic (issue 48, item 4).

A REST catalog answers every table load with the table's metadata and, asked for vended
credentials, with S3 settings (`config`: keys, an endpoint). Before, those became a DuckDB
temporary secret scoped to the table's location that outlived the call and outranked the user's
own secret: after a dry-run compaction, the user's own `COPY … TO 's3://their-bucket/…'` went out
with the catalog's keys, to the catalog's endpoint when it named one. Here:

- the catalog is Apache Iceberg's REST fixture behind a loopback proxy written below that edits
  its LoadTable answers as a hostile or careless catalog would (:class:`EditingCatalog`);
- the store is versitygw, and "another endpoint" is a counting proxy in front of it, so a request
  sent there is seen.

What must hold: our secret is gone when the call returns and the user's own secret applies again
(DuckDB's `which_secret`, and a real COPY); the call's warning says that the catalog's credentials
outranked the user's secret while it ran; an endpoint named by the catalog and not by the user's
configuration is refused before any request goes there, and used once the configuration trusts it.
"""

from __future__ import annotations

import json
import re
import textwrap
import threading
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable

import duckdb
import pyarrow as pa
import pytest

from conftest import new_connection, pip_extension_path
from rest_catalog import RestCatalogServer
from s3_server import ACCESS_KEY_ID, SECRET_ACCESS_KEY, S3Server, duckdb_secret_sql, start_latency_proxy

BUCKET = "hostile"
WAREHOUSE = f"s3://{BUCKET}/warehouse"
SMALL = "small_file_threshold_mb := 1, target_file_size_mb := 2"
TABLE_LOAD = re.compile(r"^/v1/(?:[^/]+/)?namespaces/[^/]+/tables/[^/]+$")


@pytest.fixture(scope="module")
def s3(tmp_path_factory) -> S3Server:
    server = S3Server.start(tmp_path_factory.mktemp("s3"))
    server.create_bucket(BUCKET)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def rest(s3, tmp_path_factory) -> RestCatalogServer:
    server = RestCatalogServer()
    server.start(tmp_path_factory.mktemp("rest"), warehouse=WAREHOUSE, s3_endpoint=s3.endpoint,
                 access_key=ACCESS_KEY_ID, secret_key=SECRET_ACCESS_KEY)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def pycat(rest):
    catalog = rest.pyiceberg_catalog("prod")
    catalog.create_namespace_if_not_exists("ns")
    return catalog


class EditingCatalog:
    """A REST catalog on loopback that forwards every request to ``upstream`` and passes each
    LoadTable answer (``GET …/namespaces/{ns}/tables/{t}``, 200) through ``edit`` first."""

    def __init__(self, upstream: str, edit: Callable[[dict], dict]):
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def forward(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                skip = {"host", "content-length", "connection", "accept-encoding"}
                headers = {k: v for k, v in self.headers.items() if k.lower() not in skip}
                request = urllib.request.Request(upstream + self.path, data=body, method=self.command,
                                                 headers=headers)
                try:
                    with urllib.request.urlopen(request, timeout=60) as reply:
                        status, data, kind = reply.status, reply.read(), reply.headers.get("Content-Type")
                except urllib.error.HTTPError as e:
                    status, data, kind = e.code, e.read(), e.headers.get("Content-Type")
                if self.command == "GET" and status == 200 and TABLE_LOAD.match(urllib.parse.urlsplit(self.path).path):
                    data = json.dumps(outer.edit(json.loads(data))).encode()
                self.send_response(status)
                self.send_header("Content-Type", kind or "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_DELETE = do_HEAD = forward

        self.edit = edit
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.uri = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def vending(config: dict[str, str]) -> Callable[[dict], dict]:
    """An edit that vends ``config`` with the table, as a catalog asked for vended credentials does."""

    def edit(body: dict) -> dict:
        body["config"] = dict(config)
        return body

    return edit


def fragmented(pycat, name: str) -> None:
    """``ns.<name>``: six appends of 100 rows, six small files."""
    ident = f"ns.{name}"
    if pycat.table_exists(ident):
        pycat.drop_table(ident)
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("name", pa.string())])
    table = pycat.create_table(ident, schema=schema)
    for b in range(6):
        table.append(pa.Table.from_pylist([{"id": b * 100 + i, "name": f"n{i % 7}"} for i in range(100)],
                                          schema=schema))


def connect_through(lakehouse_extension, monkeypatch, home: Path, catalog_uri: str, s3: S3Server, *,
                    trust: bool = False) -> duckdb.DuckDBPyConnection:
    """A user's session: a ``.pyiceberg.yaml`` naming the catalog at ``catalog_uri`` with the
    store's endpoint and a wrong secret (only credentials the catalog vends can read the table),
    httpfs and our extension loaded."""
    home.mkdir(parents=True, exist_ok=True)
    trusted = '    lakehouse.trust-catalog-endpoint: "true"\n' if trust else ""
    (home / ".pyiceberg.yaml").write_text(textwrap.dedent(f"""\
        default-catalog: prod
        catalog:
          prod:
            type: rest
            uri: {catalog_uri}
            s3.endpoint: {s3.endpoint}
            s3.access-key-id: {ACCESS_KEY_ID}
            s3.secret-access-key: not-the-secret
            s3.region: us-east-1
            s3.path-style-access: "true"
        """) + trusted)
    monkeypatch.setenv("PYICEBERG_HOME", str(home))
    connection = new_connection()
    connection.execute(f"LOAD '{pip_extension_path('httpfs')}'")
    connection.execute(f"LOAD '{lakehouse_extension}'")
    return connection


def our_secrets(connection) -> list[str]:
    return [r[0] for r in connection.execute(
        "SELECT name FROM duckdb_secrets() WHERE name LIKE '\\_\\_lakehouse%' ESCAPE '\\'").fetchall()]


def secret_for(connection, path: str) -> str | None:
    row = connection.execute("SELECT name FROM which_secret(?, 's3')", [path]).fetchone()
    return row[0] if row else None


def test_the_catalogs_secret_lasts_the_call_and_the_users_own_applies_again(
        lakehouse_extension, clean_catalog_env, pycat, rest, s3, tmp_path):
    """The catalog vends the keys (the configuration's secret is wrong), the user has their own
    secret for the whole bucket. A dry-run compaction reads the data with the vended keys (it
    succeeds) and its warning names the user's secret it outranked; afterwards no secret of ours
    is left, DuckDB picks the user's secret for a path under the table, and the user's own COPY
    there lands through it."""
    fragmented(pycat, "lease")
    catalog = EditingCatalog(rest.uri, vending({"s3.access-key-id": ACCESS_KEY_ID,
                                                "s3.secret-access-key": SECRET_ACCESS_KEY}))
    try:
        connection = connect_through(lakehouse_extension, clean_catalog_env, tmp_path / "home", catalog.uri, s3)
        connection.execute(duckdb_secret_sql(s3, f"s3://{BUCKET}/", name="mine"))
        rows = connection.execute(
            f"SELECT verdict, warning FROM lakehouse_compact('ns.lease', {SMALL}, dry_run := true)").fetchall()
    finally:
        catalog.stop()
    assert rows and all(verdict == "would compact" for verdict, _ in rows), rows
    warnings = {warning for _, warning in rows}
    assert len(warnings) == 1 and "not with your DuckDB secret 'mine'" in next(iter(warnings)), warnings
    assert f"s3://{BUCKET}/warehouse/ns/lease/" in next(iter(warnings)), warnings
    assert our_secrets(connection) == [], "the call's secret outlived it"
    target = f"s3://{BUCKET}/warehouse/ns/lease/data/users-own.parquet"
    assert secret_for(connection, target) == "mine"
    connection.execute(f"COPY (SELECT 42 AS answer) TO '{target}'")
    assert connection.execute(f"SELECT answer FROM read_parquet('{target}')").fetchall() == [(42,)]
    assert (s3.data_dir / BUCKET / "warehouse/ns/lease/data/users-own.parquet").is_file()


def test_a_catalog_cannot_send_our_s3_requests_to_its_own_endpoint_unless_trusted(
        lakehouse_extension, clean_catalog_env, pycat, rest, s3, tmp_path):
    """The catalog vends keys and an endpoint of its own (a counting proxy in front of the
    store). Without the configuration's consent every call on the table is refused, naming the
    endpoint and the setting that allows it, and no request reaches that endpoint; with
    ``lakehouse.trust-catalog-endpoint: true`` the same call runs through it, and leaves no
    secret behind."""
    fragmented(pycat, "redirect")
    proxy = start_latency_proxy(s3.endpoint, 0)
    vended = {"s3.endpoint": proxy.endpoint, "s3.access-key-id": ACCESS_KEY_ID,
              "s3.secret-access-key": SECRET_ACCESS_KEY}
    catalog = EditingCatalog(rest.uri, vending(vended))
    try:
        connection = connect_through(lakehouse_extension, clean_catalog_env, tmp_path / "a", catalog.uri, s3)
        for call in [f"lakehouse_compact('ns.redirect', {SMALL}, dry_run := true)",
                     "lakehouse_fragmentation('ns.redirect')"]:
            with pytest.raises(duckdb.Error) as raised:
                connection.execute(f"SELECT * FROM {call}").fetchall()
            message = str(raised.value)
            assert f"names the S3 endpoint 'http://{proxy.host}' for table 'ns.redirect'" in message, message
            assert "lakehouse.trust-catalog-endpoint: true" in message, message
            assert SECRET_ACCESS_KEY not in message
        assert proxy.stats()["requests"] == 0, "a request went to the catalog's endpoint"
        assert our_secrets(connection) == []

        trusting = connect_through(lakehouse_extension, clean_catalog_env, tmp_path / "b", catalog.uri, s3,
                                   trust=True)
        rows = trusting.execute(
            f"SELECT verdict FROM lakehouse_compact('ns.redirect', {SMALL}, dry_run := true)").fetchall()
        assert rows and all(r[0] == "would compact" for r in rows), rows
        assert proxy.stats()["requests"] > 0, "the trusted endpoint was not used"
        assert our_secrets(trusting) == []
    finally:
        catalog.stop()
        proxy.stop()
