"""Once the commit point is passed, nothing the new metadata names may be deleted.

The commit point of a path table is the creation of ``v{N+1}.metadata.json`` (readers that follow
versions past ``version-hint.text`` — Java's ``HadoopTableOperations``, this extension — see it at
once); of a Delta table, the creation of ``_delta_log/<v>.json``. What fails after it (the hint
cannot be moved: a read-only file, a full disk, a failed PUT; delta-rs's post-commit checkpoint)
must leave the commit standing, reported with a warning — never as an error, after which the
actions remove what they wrote. And a write whose answer was lost (the object store answered 503
after the object landed, and the client's own retry of the conditional write then answered "already
exists") is recognized as ours.

Real faults only: the hint made immutable (``chattr +i``, as root on ext4), a Delta
``_last_checkpoint`` made immutable, and a loopback proxy in front of a real S3 server (versitygw)
that fails chosen PUTs before or after forwarding them (scripts/latency_proxy). Readers we did not
write check the outcome: DuckDB's iceberg and delta extensions, pyiceberg, deltalake.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import subprocess
import textwrap
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table import StaticTable

import conftest as c
import delta_tables as d
from s3_server import ACCESS_KEY_ID, SECRET_ACCESS_KEY, duckdb_secret_sql, start_latency_proxy
from test_compact_iceberg import compact, duckdb_rows
from test_object_storage import BUCKET, s3  # noqa: F401 - the module's S3 server fixture

DEMO = {"small_file_threshold_mb": 0.064, "target_file_size_mb": 0.128}


@contextlib.contextmanager
def immutable(path: Path):
    """``chattr +i path`` for the duration: not even root can replace or rename over it."""
    subprocess.run(["chattr", "+i", str(path)], check=True)
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


def referenced_files_exist(metadata: str) -> None:
    """Every manifest list, manifest and data file the table at `metadata` references exists (pyiceberg)."""
    table = StaticTable.from_metadata(metadata)
    for snapshot in table.snapshots():
        assert Path(c.local_path(snapshot.manifest_list)).exists(), snapshot.manifest_list
        for manifest in snapshot.manifests(table.io):
            assert Path(c.local_path(manifest.manifest_path)).exists(), manifest.manifest_path
            for entry in manifest.fetch_manifest_entry(table.io):
                assert Path(c.local_path(entry.data_file.file_path)).exists(), entry.data_file.file_path


# --------------------------------------------------------------------------- Iceberg, local disk

HINT_WARNING = "version-hint.text could not be updated"


def rows_of(con, sql: str) -> list[dict]:
    cursor = con.execute(sql)
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row)) for row in cursor.fetchall()]


def _committed(rows: list[dict]) -> tuple[set, set]:
    return {r["metadata_location"] for r in rows if r["metadata_location"]}, {r.get("warning") for r in rows}


def _compact(con, path):
    return _committed(compact(con, str(path), **DEMO))


def _rewrite_manifests(con, path):
    return _committed(rows_of(con, f"SELECT * FROM lakehouse_rewrite_manifests('{path}')"))


def _expire(con, path):
    return _committed(rows_of(con, f"SELECT * FROM lakehouse_expire_snapshots('{path}', snapshot_retention_days := 0, "
                                   "retain_last := 2)"))


@pytest.mark.parametrize("action", [_compact, _rewrite_manifests, _expire], ids=["compact", "rewrite_manifests", "expire"])
def test_a_commit_whose_hint_cannot_move_stands_with_a_warning(con, iceberg_con, tmp_path, action):
    """v17 is created, then the hint cannot be replaced: v17 is the table for every reader that
    follows versions (and for the next commit), so each action reports its commit with the
    warning, and every file v17 references is on disk. (Before: an I/O error, and compaction and
    the manifest rewrite removed the new snapshot's files — v17 pointed at missing files.)"""
    path = tmp_path / "demo"
    con.execute(f"SELECT * FROM lakehouse_demo('{path}')").fetchall()
    metadata = path / "metadata"
    before = duckdb_rows(iceberg_con, str(metadata / "v16.metadata.json"))
    hint = metadata / "version-hint.text"
    with immutable(hint):
        committed, warnings = action(con, path)
    assert committed == {str(metadata / "v17.metadata.json")}, committed
    assert len(warnings) == 1 and HINT_WARNING in (warnings.pop() or ""), "the warning is on every row"
    assert hint.read_text().strip() == "16"
    referenced_files_exist(str(metadata / "v17.metadata.json"))
    assert duckdb_rows(iceberg_con, str(metadata / "v17.metadata.json")) == before
    # Readers of this extension follow v17 past the hint; the next commit moves the hint to v18.
    assert con.execute(f"SELECT count(*) FROM lakehouse_fragmentation('{path}')").fetchone()[0] > 0
    compact(con, str(path), **DEMO, fragmentation_ratio_threshold=0.0)
    assert hint.read_text().strip() == "18"
    assert duckdb_rows(iceberg_con, str(path)) == before


def test_the_gate_reports_a_commit_that_stands_with_its_warnings(con, iceberg_con, tmp_path):
    """The gate compacts and expires a path table whose hint cannot move: both commits stand, the
    run is `maintained`, and every row (and the history table) carries the warnings."""
    path = tmp_path / "demo"
    con.execute(f"SELECT * FROM lakehouse_demo('{path}')").fetchall()
    before = duckdb_rows(iceberg_con, str(path / "metadata" / "v16.metadata.json"))
    with immutable(path / "metadata" / "version-hint.text"):
        rows = rows_of(con, f"SELECT * FROM lakehouse_gate('{path}', small_file_threshold_mb := 0.064, "
                            "target_file_size_mb := 0.128, snapshot_retention_days := 0, history_table := 'runs')")
    assert {r["status"] for r in rows} == {"maintained"}, rows
    assert all(HINT_WARNING in (r.get("warnings") or "") for r in rows), rows
    (history,) = con.execute("SELECT DISTINCT warnings FROM runs").fetchone()
    assert HINT_WARNING in history
    newest = max((path / "metadata").glob("v*.metadata.json"), key=lambda p: int(p.name[1:].split(".")[0]))
    referenced_files_exist(str(newest))
    assert duckdb_rows(iceberg_con, str(newest)) == before


# --------------------------------------------------------------------------- S3


def s3_config(home: Path, endpoint: str) -> None:
    """A `.pyiceberg.yaml` whose default catalog carries the S3 keys (what path tables use)."""
    home.mkdir(parents=True, exist_ok=True)
    (home / ".pyiceberg.yaml").write_text(textwrap.dedent(f"""\
        catalog:
          default:
            uri: sqlite:///{home}/unused.db
            s3.endpoint: {endpoint}
            s3.access-key-id: {ACCESS_KEY_ID}
            s3.secret-access-key: {SECRET_ACCESS_KEY}
            s3.region: us-east-1
            s3.path-style-access: "true"
        """))


def compact_through_proxy(s3, lakehouse_extension, monkeypatch, tmp_path, table: str, **faults) -> list[dict]:
    """`lakehouse_compact(table)` (1 MiB small, 2 MiB target) by our extension (with httpfs),
    reaching S3 through a proxy with `faults` (start_latency_proxy's options)."""
    proxy = start_latency_proxy(s3.endpoint, 0, **faults)
    try:
        home = tmp_path / "home"
        s3_config(home, proxy.endpoint)
        for key in [k for k in os.environ if k.startswith("PYICEBERG_")]:
            monkeypatch.delenv(key)
        monkeypatch.setenv("PYICEBERG_HOME", str(home))
        connection = c.new_connection()
        connection.execute(f"LOAD '{c.pip_extension_path('httpfs')}'")
        connection.execute(f"LOAD '{lakehouse_extension}'")
        return rows_of(connection, f"SELECT * FROM lakehouse_compact('{table}', small_file_threshold_mb := 1, "
                                   "target_file_size_mb := 2)")
    finally:
        proxy.stop()


@pytest.fixture
def s3con(s3):
    connection = c.new_connection()
    connection.execute(f"LOAD '{c.pip_extension_path('httpfs')}'")
    c.load_iceberg(connection)
    connection.execute(f"LOAD '{c.pip_extension_path('delta')}'")
    connection.execute(duckdb_secret_sql(s3, f"s3://{BUCKET}/"))
    yield connection
    connection.close()


def s3_path_table(s3, s3con, tmp_path, name: str) -> tuple[str, list[tuple]]:
    """A fragmented Hadoop-style Iceberg table on S3 (pyiceberg writes it through a sqlite
    catalog; its metadata is copied to `v1.metadata.json` with a hint of 1, as a path table has
    them). Returns the v1 location and its rows."""
    catalog = SqlCatalog(
        "writer", uri=f"sqlite:///{tmp_path}/writer.db", warehouse=f"s3://{BUCKET}/{name}",
        **{"s3.endpoint": s3.endpoint, "s3.access-key-id": ACCESS_KEY_ID, "s3.secret-access-key": SECRET_ACCESS_KEY,
           "s3.region": "us-east-1", "s3.path-style-access": "true"},
    )
    catalog.create_namespace("ns")
    schema = pa.schema([("id", pa.int64()), ("day", pa.date32()), ("name", pa.string())])
    table = catalog.create_table("ns.t", schema=schema)
    for b in range(6):
        table.append(pa.Table.from_pylist(
            [{"id": b * 100 + i, "day": dt.date(2026, 10, 1), "name": f"n{i}"} for i in range(100)], schema=schema))
    root = table.metadata_location.rsplit("/metadata/", 1)[0]
    v1 = f"{root}/metadata/v1.metadata.json"
    s3con.execute(f"COPY (SELECT content FROM read_text('{table.metadata_location}')) TO '{v1}' "
                  "(FORMAT csv, HEADER false, QUOTE '', ESCAPE '')")
    s3con.execute(f"COPY (SELECT 1) TO '{root}/metadata/version-hint.text' (FORMAT csv, HEADER false)")
    return v1, sorted(s3con.execute(f"SELECT * FROM iceberg_scan('{v1}')").fetchall())


def s3_keys(s3, prefix: str) -> set[str]:
    root = s3.data_dir / BUCKET
    return {str(p.relative_to(root)) for p in (root / prefix).rglob("*") if p.is_file()}


def test_an_s3_path_table_whose_hint_put_fails_keeps_its_commit(lakehouse_extension, s3, s3con, monkeypatch, tmp_path):
    """Every PUT of version-hint.text fails (503, never forwarded): v2 was created by its
    conditional write, so the compaction stands, with the warning; v2's files are all there."""
    v1, before = s3_path_table(s3, s3con, tmp_path, "hint_fails")
    rows = compact_through_proxy(s3, lakehouse_extension, monkeypatch, tmp_path, v1, fail_put_before="version-hint.text")
    v2 = v1.replace("v1.metadata.json", "v2.metadata.json")
    assert [(r["verdict"], r["metadata_location"]) for r in rows] == [("compacted", v2)], rows
    assert HINT_WARNING in (rows[0].get("warning") or "")
    hint = s3con.execute(f"SELECT content FROM read_text('{v1.rsplit('/', 1)[0]}/version-hint.text')").fetchone()[0]
    assert hint.strip() == "1"
    assert sorted(s3con.execute(f"SELECT * FROM iceberg_scan('{v2}')").fetchall()) == before


def test_an_s3_commit_that_landed_while_the_store_answered_503_is_ours(lakehouse_extension, s3, s3con, monkeypatch,
                                                                      tmp_path):
    """The conditional PUT of v2.metadata.json lands and is answered 503; the client's retry then
    gets 412 (the object exists). That object is ours: the compaction is committed, and none of
    its files is removed. (Before: taken for another writer's commit — a conflict — after which
    the rewrite's data files and manifests were deleted, and v2 pointed at missing files.)"""
    v1, before = s3_path_table(s3, s3con, tmp_path, "lost_answer")
    rows = compact_through_proxy(s3, lakehouse_extension, monkeypatch, tmp_path, v1,
                                 fail_put_after_once="v2.metadata.json")
    v2 = v1.replace("v1.metadata.json", "v2.metadata.json")
    assert [(r["verdict"], r["metadata_location"]) for r in rows] == [("compacted", v2)], rows
    assert sorted(s3con.execute(f"SELECT * FROM iceberg_scan('{v2}')").fetchall()) == before
    files = s3con.execute(f"SELECT file_path FROM iceberg_metadata('{v2}')").fetchall()
    keys = s3_keys(s3, "lost_answer")
    assert files and all(f.removeprefix(f"s3://{BUCKET}/") in keys for (f,) in files), (files, keys)


def test_an_s3_commit_whose_write_never_lands_keeps_every_file(lakehouse_extension, s3, s3con, monkeypatch,
                                                                tmp_path):
    """Every PUT of v2.metadata.json fails (503, never forwarded) and the object is not there:
    the write could still land (a request a store finishes after the client gave up), so the
    outcome is unknown — the error says so and every rewritten file is kept (orphan removal
    deletes them once nothing references them); the table is unchanged. (Before: the files were
    removed on the word of a failed write.)"""
    v1, before = s3_path_table(s3, s3con, tmp_path, "never_lands")
    keys = s3_keys(s3, "never_lands")
    with pytest.raises(Exception, match="did not confirm the commit .*left in place"):
        compact_through_proxy(s3, lakehouse_extension, monkeypatch, tmp_path, v1, fail_put_before="v2.metadata.json")
    new = s3_keys(s3, "never_lands") - keys
    assert sum(k.endswith("-compacted.parquet") for k in new) == 1, new
    assert not any(k.endswith("v2.metadata.json") for k in new)
    assert sorted(s3con.execute(f"SELECT * FROM iceberg_scan('{v1}')").fetchall()) == before


# --------------------------------------------------------------------------- Delta


def _fragmented_delta(uri: str, storage_options: dict | None = None, configuration: dict | None = None) -> None:
    for b in range(6):
        rows = [{"id": b * 100 + i, "day": f"2026-10-0{1 + i % 2}", "amount": float(i)} for i in range(100)]
        write_deltalake(uri, pa.Table.from_pylist(rows), mode="append", partition_by=["day"],
                        storage_options=storage_options, configuration=configuration)


def test_a_delta_commit_whose_checkpoint_fails_stands_with_a_warning(con, tmp_path):
    """With `delta.checkpointInterval = 1` every commit is followed by a checkpoint; here its
    `_last_checkpoint` cannot be replaced. The OPTIMIZE version exists, so it stands: reported
    with the warning, its files kept, every reader reading the same rows. (Before: the error made
    the compaction remove the files its committed version adds.)"""
    path = tmp_path / "checkpointed"
    _fragmented_delta(str(path), configuration={"delta.checkpointInterval": "1"})
    DeltaTable(str(path)).create_checkpoint()
    before = d.rows_deltalake(path)
    version = d.current_version(path)
    with immutable(path / "_delta_log" / "_last_checkpoint"):
        rows = rows_of(con, f"SELECT * FROM lakehouse_compact('{path}', small_file_threshold_mb := 1, "
                            "target_file_size_mb := 2)")
    assert {r["verdict"] for r in rows} == {"compacted"}, rows
    assert all("post-commit checkpoint" in (r.get("warning") or "") for r in rows), rows
    assert d.current_version(path) == version + 1
    assert d.rows_deltalake(path) == before
    with d.delta_connection() as duck:
        assert d.rows_duckdb(duck, path) == before
    adds = [a["add"]["path"] for a in d.commit_actions(path, version + 1) if "add" in a]
    assert adds and all((path / a).exists() for a in adds)


def test_a_delta_commit_on_s3_that_landed_while_the_store_answered_503_is_ours(lakehouse_extension, s3, monkeypatch,
                                                                              tmp_path):
    """The conditional PUT of the next `_delta_log` entry lands and is answered 503; the retry
    gets 412, which delta-rs takes for another writer's version and then a conflict with it. The
    log holds our commit (its `lakehouse.commitId`): the compaction is committed and its files
    stay. (Before: reported as a conflict, and the files the committed version adds removed.)"""
    uri = f"s3://{BUCKET}/delta_lost_answer"
    options = {"AWS_ENDPOINT_URL": s3.endpoint, "AWS_ACCESS_KEY_ID": ACCESS_KEY_ID,
               "AWS_SECRET_ACCESS_KEY": SECRET_ACCESS_KEY, "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true",
               "conditional_put": "etag"}
    _fragmented_delta(uri, storage_options=options)
    before = sorted(DeltaTable(uri, storage_options=options).to_pyarrow_table().to_pylist(), key=lambda r: r["id"])
    next_log = f"_delta_log/{6:020}.json"
    rows = compact_through_proxy(s3, lakehouse_extension, monkeypatch, tmp_path, uri, fail_put_after_once=next_log)
    assert [r["verdict"] for r in rows] == ["compacted", "compacted"], rows
    table = DeltaTable(uri, storage_options=options)
    assert table.version() == 6 and table.history(1)[0]["operation"] == "OPTIMIZE"
    assert sorted(table.to_pyarrow_table().to_pylist(), key=lambda r: r["id"]) == before
    log = (s3.data_dir / BUCKET / "delta_lost_answer" / next_log).read_text()
    adds = [json.loads(line)["add"]["path"] for line in log.splitlines() if '"add"' in line]
    assert adds and all((s3.data_dir / BUCKET / "delta_lost_answer" / a).exists() for a in adds)
