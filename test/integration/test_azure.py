"""Delta tables on Azure Blob Storage (Azurite on loopback, `azure_server.py`), written by
deltalake (delta-rs, a writer we did not write): profiled, compacted and vacuumed through `az://`
with object_store's Azure client (credentials from the environment, as object_store reads them)
and DuckDB's azure extension for the data; deltalake and DuckDB's delta extension read the same
rows after, and our VACUUM deletes exactly the files the compaction replaced.

The first step of issue 33: Iceberg tables on Azure, catalog properties (`adls.*`) and `abfss://`
(Azurite has no DFS endpoint) are not covered yet.
"""

from __future__ import annotations

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
