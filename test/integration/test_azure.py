"""Delta tables on Azure Blob Storage (Azurite on loopback, `azure_server.py`), written by
deltalake (delta-rs, a writer we did not write): profiled, compacted and vacuumed through `az://`
with object_store's Azure client (credentials from the environment, as object_store reads them)
and DuckDB's azure extension for the data; deltalake and DuckDB's delta extension read the same
rows after, and our VACUUM deletes exactly the files the compaction replaced.

And an Iceberg table pyiceberg writes through adlfs to `abfs://`, with the catalog's
`adls.connection-string` as the only credential: profiled, expired and cleaned of orphans.
Compaction of `abfs[s]://` tables is not covered: DuckDB reads them through ADLS Gen2's DFS
endpoint, which Azurite does not have.
"""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

from azure_server import AzuriteServer
from conftest import lakehouse_extension_path, new_connection, pip_extension_path


@pytest.fixture(scope="module")
def azurite(tmp_path_factory):
    server = AzuriteServer.start(tmp_path_factory.mktemp("azurite"))
    with pytest.MonkeyPatch.context() as patch:
        for key, value in server.environment().items():
            patch.setenv(key, value)
        server.create_container("lake")
        yield server
    server.stop()


@pytest.fixture
def azcon(azurite):
    """DuckDB with the azure extension (from its wheel) and ours; the secret ours creates."""
    connection = new_connection()
    connection.execute(f"LOAD '{pip_extension_path('azure')}'")
    connection.execute(f"LOAD '{lakehouse_extension_path()}'")
    yield connection
    connection.close()


def reader(azurite):
    """DuckDB's delta extension over Azurite: an independent reader."""
    connection = new_connection()
    for name in ("azure", "delta"):
        connection.execute(f"LOAD '{pip_extension_path(name)}'")
    connection.execute(f"CREATE SECRET az (TYPE azure, CONNECTION_STRING '{azurite.connection_string}')")
    return connection


def test_a_delta_table_on_azure_is_profiled_compacted_and_vacuumed(azurite, azcon):
    from deltalake import DeltaTable, write_deltalake

    uri = "az://lake/events"
    options = azurite.delta_options()
    def append(i: int) -> None:
        rows = pa.table({"id": list(range(i * 100, i * 100 + 100)), "p": ["a" if i % 2 else "b"] * 100})
        write_deltalake(uri, rows, mode="append", partition_by=["p"], storage_options=options)

    for i in range(3):
        append(i)
    DeltaTable(uri, storage_options=options).delete("id % 7 = 0")  # rewrites the files it touches
    for i in range(3, 7):
        append(i)
    table = DeltaTable(uri, storage_options=options)
    want = sorted(table.to_pyarrow_table().to_pylist(), key=lambda r: r["id"])
    files = len(table.file_uris())

    profile = azcon.execute(f"SELECT partition, total_files FROM lakehouse_fragmentation('{uri}')").fetchall()
    assert sum(n for _, n in profile) == files and {p for p, _ in profile} == {"p=a", "p=b"}, profile
    plans = azcon.execute(
        f"SELECT partition, verdict, files_after FROM lakehouse_compact('{uri}', small_file_threshold_mb := 1)"
    ).fetchall()
    assert sorted(plans) == [("p=a", "compacted", 1), ("p=b", "compacted", 1)], plans

    table = DeltaTable(uri, storage_options=options)
    assert sorted(table.to_pyarrow_table().to_pylist(), key=lambda r: r["id"]) == want
    duck = reader(azurite)
    assert sorted(duck.execute(f"SELECT id, p FROM delta_scan('{uri}')").fetchall()) == [(r["id"], r["p"]) for r in want]

    vacuumed = azcon.execute(
        f"SELECT path, action FROM lakehouse_vacuum('{uri}', retention_hours := 0, dry_run := false, "
        "enforce_retention_duration := false)"
    ).fetchall()
    assert vacuumed and all(action == "deleted" for _, action in vacuumed), vacuumed
    assert len(DeltaTable(uri, storage_options=options).file_uris()) == 2
    assert sorted(duck.execute(f"SELECT id, p FROM delta_scan('{uri}')").fetchall()) == [(r["id"], r["p"]) for r in want]


def test_an_iceberg_table_pyiceberg_wrote_to_azure_is_profiled_expired_and_cleaned(azurite, tmp_path, monkeypatch):
    """pyiceberg (through adlfs) writes an Iceberg table to `abfs://` behind a SQL catalog whose
    `adls.connection-string` is the only credential: no AZURE_* variable is set. Profile, health,
    expiry and orphan removal (metadata work, object_store's Azure client) run on it; pyiceberg
    reads the same rows after, and exactly the expired manifest lists and the planted orphan are
    gone. Compaction is not run here: DuckDB's azure extension reads `abfs://` through ADLS Gen2's
    DFS endpoint, which Azurite does not have."""
    from azure.storage.blob import BlobServiceClient
    from pyiceberg.catalog.sql import SqlCatalog

    for key in list(os.environ):
        if key.startswith("AZURE_") or key.startswith("AZURITE_") or key.startswith("PYICEBERG_"):
            monkeypatch.delenv(key)
    azurite.create_container("warehouse")
    props = {"uri": f"sqlite:///{tmp_path / 'catalog.db'}", "warehouse": "abfs://warehouse/iceberg",
             "adls.connection-string": azurite.connection_string}
    catalog = SqlCatalog("azure", **props)
    catalog.create_namespace("ns")
    table = catalog.create_table("ns.events", pa.schema([("id", pa.int64()), ("p", pa.string())]))
    for i in range(4):
        table.append(pa.table({"id": list(range(i * 10, i * 10 + 10)), "p": ["a"] * 10}))
    before = sorted(catalog.load_table("ns.events").scan().to_arrow().to_pylist(), key=lambda r: r["id"])
    for key, value in props.items():
        monkeypatch.setenv(f"PYICEBERG_CATALOG__AZURE__{key.upper().replace('.', '__').replace('-', '_')}", value)
    container = BlobServiceClient.from_connection_string(azurite.connection_string).get_container_client("warehouse")
    container.upload_blob("iceberg/ns/events/data/orphan.parquet", b"not referenced")
    lists_before = {b.name for b in container.list_blobs(name_starts_with="iceberg/ns/events/metadata/snap-")}

    con = new_connection()
    con.execute(f"LOAD '{pip_extension_path('azure')}'")
    con.execute(f"LOAD '{lakehouse_extension_path()}'")
    assert con.execute("SELECT total_files FROM lakehouse_fragmentation('azure.ns.events')").fetchall() == [(4,)]
    assert con.execute("SELECT snapshots FROM lakehouse_metadata_health('azure.ns.events')").fetchone()[0] == 4
    expired = con.execute("SELECT kind, action FROM lakehouse_expire_snapshots('azure.ns.events', retain_last := 1, "
                          "snapshot_retention_days := 0, dry_run := false)").fetchall()
    assert sorted(expired).count(("manifest_list", "deleted")) == 3, expired
    removed = con.execute("SELECT path, action FROM lakehouse_remove_orphan_files('azure.ns.events', "
                          "older_than_days := 0, allow_young_orphans := true, dry_run := false)").fetchall()
    con.close()
    assert removed == [("abfs://warehouse/iceberg/ns/events/data/orphan.parquet", "deleted")], removed
    after = catalog.load_table("ns.events")
    assert len(after.snapshots()) == 1
    assert sorted(after.scan().to_arrow().to_pylist(), key=lambda r: r["id"]) == before
    lists_after = {b.name for b in container.list_blobs(name_starts_with="iceberg/ns/events/metadata/snap-")}
    assert len(lists_before - lists_after) == 3 and len(lists_after) == 1
    live = {f["file_path"] for f in after.inspect.files().to_pylist()}
    present = {f"abfs://warehouse/{b.name}" for b in container.list_blobs(name_starts_with="iceberg/ns/events/data/")}
    assert live == present
