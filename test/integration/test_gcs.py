"""Tables on Google Cloud Storage (`gs://`), against fake-gcs-server on loopback (gcs_server.py).

pyiceberg (pyarrow's GCS filesystem, `gcs.service.host` pointing at the emulator) writes an
Iceberg table behind a SQL catalog whose `gcs.*` properties are all we are given; deltalake
writes a Delta table that is uploaded as is through the emulator's JSON API. Our profile, health
and dry runs read them through object_store's GCS client and agree with the writers.

fake-gcs-server does not implement the XML API's object PUT that object_store (ours and
delta-rs's) writes with, so commits cannot land on it: the test checks that a real expiry fails
naming the location and leaves the table exactly as it was (same current metadata, no new
object, pyiceberg reads the same rows). Commits on real GCS (conditional creates with
`ifGenerationMatch=0`, probed once per store before a path table's commit) and DuckDB's reads of
`gs://` data (httpfs with HMAC keys) are untested here.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest

from conftest import lakehouse_extension_path, new_connection, pip_extension_path
from gcs_server import GcsServer


@pytest.fixture(scope="module")
def gcs(tmp_path_factory):
    server = GcsServer.start(tmp_path_factory.mktemp("gcs"))
    server.create_bucket("lake")
    yield server
    server.stop()


@pytest.fixture
def con(monkeypatch, tmp_path):
    for key in list(os.environ):
        if key.startswith("GOOGLE_") or key.startswith("PYICEBERG_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("PYICEBERG_HOME", str(tmp_path))
    connection = new_connection()
    connection.execute(f"LOAD '{pip_extension_path('httpfs')}'")
    connection.execute(f"LOAD '{lakehouse_extension_path()}'")
    yield connection
    connection.close()


def test_an_iceberg_table_on_gcs_is_profiled_and_a_failed_commit_changes_nothing(gcs, con, monkeypatch, tmp_path):
    from pyiceberg.catalog.sql import SqlCatalog

    props = {"uri": f"sqlite:///{tmp_path / 'catalog.db'}", "warehouse": "gs://lake/iceberg",
             "gcs.service.host": gcs.endpoint, "gcs.oauth2.token": "emulator-token",
             "gcs.oauth2.token-expires-at": "4102444800000"}
    catalog = SqlCatalog("gcs", **props)
    catalog.create_namespace("ns")
    table = catalog.create_table("ns.events", pa.schema([("id", pa.int64()), ("day", pa.string())]))
    for i in range(4):
        table.append(pa.table({"id": list(range(i * 10, i * 10 + 10)), "day": ["2026-10-01"] * 10}))
    table = catalog.load_table("ns.events")
    rows = sorted(table.scan().to_arrow().to_pylist(), key=lambda r: r["id"])
    for key, value in props.items():
        monkeypatch.setenv(f"PYICEBERG_CATALOG__GCS__{key.upper().replace('.', '__').replace('-', '_')}", value)
    gcs.upload("lake", "iceberg/ns/events/data/orphan.parquet", b"not referenced")

    assert con.execute("SELECT total_files, record_count FROM lakehouse_fragmentation('gcs.ns.events')").fetchall() == [
        (len(table.inspect.files()), 40)]
    assert con.execute("SELECT snapshots FROM lakehouse_metadata_health('gcs.ns.events')").fetchone()[0] == 4
    would = con.execute("SELECT kind, path FROM lakehouse_expire_snapshots('gcs.ns.events', retain_last := 1, "
                        "snapshot_retention_days := 0, dry_run := true) WHERE kind = 'manifest_list'").fetchall()
    expected = {s.manifest_list for s in table.snapshots() if s.snapshot_id != table.current_snapshot().snapshot_id}
    assert {path for _, path in would} == expected and len(expected) == 3
    orphans = con.execute("SELECT path FROM lakehouse_remove_orphan_files('gcs.ns.events', older_than_days := 0, "
                          "allow_young_orphans := true, dry_run := true)").fetchall()
    assert orphans == [("gs://lake/iceberg/ns/events/data/orphan.parquet",)]

    before = gcs.objects("lake", "iceberg/ns/events/")
    with pytest.raises(Exception) as failed:
        con.execute("SELECT * FROM lakehouse_expire_snapshots('gcs.ns.events', retain_last := 1, "
                    "snapshot_retention_days := 0, dry_run := false)").fetchall()
    message = str(failed.value)
    assert "gs://lake/iceberg/ns/events/metadata/" in message and "nothing was committed" in message, message
    assert "emulator-token" not in message
    assert gcs.objects("lake", "iceberg/ns/events/") == before
    after = catalog.load_table("ns.events")
    assert after.metadata_location == table.metadata_location
    assert sorted(after.scan().to_arrow().to_pylist(), key=lambda r: r["id"]) == rows


def test_a_delta_table_on_gcs_is_profiled_and_its_vacuum_planned(gcs, con, monkeypatch, tmp_path):
    """Named by path, with only object_store's environment (`GOOGLE_BASE_URL`) to go on."""
    from deltalake import DeltaTable, write_deltalake

    monkeypatch.setenv("GOOGLE_BASE_URL", gcs.endpoint)
    local = tmp_path / "events"
    for i in range(3):
        write_deltalake(str(local), pa.table({"id": list(range(i * 10, i * 10 + 10)), "p": ["a", "b"] * 5}),
                        mode="append", partition_by=["p"])
    write_deltalake(str(local), pa.table({"id": [1], "p": ["a"]}), mode="overwrite", partition_by=["p"])
    for path in sorted(local.rglob("*")):
        if path.is_file():
            gcs.upload("lake", f"delta/events/{path.relative_to(local)}", path.read_bytes())
    live = DeltaTable(str(local)).file_uris()

    got = con.execute("SELECT sum(total_files) FROM lakehouse_fragmentation('gs://lake/delta/events')").fetchone()[0]
    assert got == len(live)
    planned = {r[0] for r in con.execute("SELECT path FROM lakehouse_vacuum('gs://lake/delta/events', "
                                         "retention_hours := 0, enforce_retention_duration := false, dry_run := true)").fetchall()}
    live_keys = {f"gs://lake/delta/events/{Path(uri).relative_to(local)}" for uri in live}
    written = {f"gs://lake/delta/events/{p.relative_to(local)}" for p in local.rglob("*.parquet")}
    assert planned == written - live_keys and len(planned) == 6, planned
