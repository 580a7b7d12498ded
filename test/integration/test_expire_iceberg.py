"""lakehouse_expire_snapshots, lakehouse_metadata_health and lakehouse_remove_orphan_files on
tables written by pyiceberg, with snapshots backdated in a copy of the metadata.

Every test checks the table afterwards with readers we did not write (pyiceberg and DuckDB's
iceberg extension), and that every file a retained snapshot needs still exists.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import sqlite3
import time
import uuid
from pathlib import Path

import pytest
from pyiceberg.catalog.sql import SqlCatalog

import conftest as c
from test_compact_iceberg import compact, duckdb_rows, pyiceberg_rows, sorted_rows

FN = "lakehouse_expire_snapshots"
DAY_MS = 86_400_000


def twin(catalog: SqlCatalog, tmp_path: Path) -> SqlCatalog:
    """A byte-for-byte copy of the catalog's warehouse under another root (paths rewritten)."""
    src, dst = catalog.test_root, tmp_path / "twin"
    shutil.copytree(src, dst)
    for path in dst.rglob("*.metadata.json"):
        path.write_text(path.read_text().replace(str(src), str(dst)))
    con = sqlite3.connect(dst / "catalog.db")
    for (loc,) in con.execute("SELECT metadata_location FROM iceberg_tables").fetchall():
        con.execute("UPDATE iceberg_tables SET metadata_location = ? WHERE metadata_location = ?",
                    (loc.replace(str(src), str(dst)), loc))
    con.commit()
    con.close()
    cat = SqlCatalog(c.CATALOG_NAME, uri=f"sqlite:///{dst}/catalog.db", warehouse=f"file://{dst}/warehouse")
    cat.test_uri = f"sqlite:///{dst}/catalog.db"  # type: ignore[attr-defined]
    return cat


def backdate(catalog: SqlCatalog, name: str, ages_days: dict[int, float]):
    """Rewrites timestamp-ms of snapshots (by position in the snapshot list) in a copy of the
    metadata to now - age, keeps the snapshot log consistent, and points the catalog at the copy."""
    def change(meta: dict, now: int) -> None:
        by_id = {}
        # Writers may list snapshots in any order: position means commit order.
        meta["snapshots"].sort(key=lambda s: (s.get("sequence-number", 0), s["timestamp-ms"]))
        for i, snap in enumerate(meta["snapshots"]):
            if i in ages_days:
                snap["timestamp-ms"] = now - int(ages_days[i] * DAY_MS) + i  # + i keeps the order strict
            by_id[snap["snapshot-id"]] = snap["timestamp-ms"]
        for entry in meta.get("snapshot-log", []):
            entry["timestamp-ms"] = by_id.get(entry["snapshot-id"], entry["timestamp-ms"])

    return commit_metadata_change(catalog, name, change)


def commit_metadata_change(catalog: SqlCatalog, name: str, change) -> object:
    """Writes a copy of the table's metadata with ``change(meta, now_ms)`` applied as the next
    metadata file and points the sqlite catalog at it, as a writer with access to the table can."""
    table = catalog.load_table(f"{c.NAMESPACE}.{name}")
    path = Path(c.local_path(table.metadata_location))
    meta = json.loads(path.read_text())
    now = int(time.time() * 1000)
    change(meta, now)
    # As a real commit does: the replaced metadata file joins the metadata log.
    meta.setdefault("metadata-log", []).append({"metadata-file": table.metadata_location, "timestamp-ms": now})
    version = int(path.name.split("-")[0]) + 1
    new_path = path.parent / f"{version:05d}-{uuid.uuid4()}.metadata.json"
    new_path.write_text(json.dumps(meta))
    con = sqlite3.connect(catalog.test_uri[len("sqlite:///"):])
    con.execute("UPDATE iceberg_tables SET metadata_location = ? WHERE table_name = ?", (f"file://{new_path}", name))
    con.commit()
    con.close()
    return catalog.load_table(f"{c.NAMESPACE}.{name}")


def expire(con, catalog, name: str, **params) -> list[dict]:
    args = "".join(f", {k} := {v!r}" if not isinstance(v, bool) else f", {k} := {str(v).lower()}"
                   for k, v in params.items())
    cur = con.execute(f"SELECT * FROM {FN}('{c.NAMESPACE}.{name}', catalog_uri := '{catalog.test_uri}'{args})")
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r)) for r in cur.fetchall()]


def snapshot_ids(table) -> list[int]:
    """Snapshot ids in commit order."""
    return [s.snapshot_id for s in sorted(table.metadata.snapshots, key=lambda s: (s.sequence_number, s.timestamp_ms))]


def files_needed(table) -> set[str]:
    """Every manifest list, manifest and data/delete file any snapshot of `table` reads."""
    needed = set()
    for snap in table.metadata.snapshots:
        needed.add(c.local_path(snap.manifest_list))
        for manifest in snap.manifests(table.io):
            needed.add(c.local_path(manifest.manifest_path))
            for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
                needed.add(c.local_path(entry.data_file.file_path))
    return needed


def assert_all_needed_files_exist(table) -> None:
    missing = [p for p in files_needed(table) if not os.path.exists(p)]
    assert not missing, missing


def build_history(catalog: SqlCatalog, appends: int = 10):
    """`appends` small appends to an identity-partitioned table."""
    table = catalog.create_table(f"{c.NAMESPACE}.hist", schema=c._DATE_SCHEMA, partition_spec=c._DATE_SPEC)
    for i in range(appends):
        table.append(c._date_rows(range(i * 10, i * 10 + 5), dt.date(2026, 10, 1 + i % 2)))
    return catalog.load_table(f"{c.NAMESPACE}.hist")


def test_exactly_the_old_snapshots_go_and_match_pyiceberg(con, iceberg_con, catalog, tmp_path):
    build_history(catalog, 10)
    # Snapshots 0..5 are 10-15 days old, 6..9 are fresh.
    table = backdate(catalog, "hist", {i: 15 - i for i in range(6)})
    before = pyiceberg_rows(table)
    ids = snapshot_ids(table)
    other = twin(catalog, tmp_path)

    dry = expire(con, catalog, "hist", dry_run=True)
    assert sorted(r["snapshot_id"] for r in dry if r["kind"] == "snapshot") == sorted(ids[:6])
    assert catalog.load_table(f"{c.NAMESPACE}.hist").metadata_location == table.metadata_location

    rows = expire(con, catalog, "hist")
    expired = [r["snapshot_id"] for r in rows if r["kind"] == "snapshot"]
    assert sorted(expired) == sorted(ids[:6])
    assert all(r["action"] == "expired" for r in rows if r["kind"] == "snapshot")
    lists = [r for r in rows if r["kind"] == "manifest_list"]
    assert len(lists) == 6 and all(r["action"] == "deleted" and not os.path.exists(c.local_path(r["path"]))
                                   for r in lists)
    # Fast appends carry every manifest over: no manifest or data file is unreachable.
    assert not [r for r in rows if r["kind"] in ("manifest", "data_file")]

    table = catalog.load_table(f"{c.NAMESPACE}.hist")
    assert snapshot_ids(table) == ids[6:]
    assert table.metadata_location == rows[0]["metadata_location"]
    assert pyiceberg_rows(table) == before
    assert duckdb_rows(iceberg_con, table.metadata_location) == before
    assert_all_needed_files_exist(table)
    # Time travel to the oldest retained snapshot still works, through both readers.
    oldest = ids[6]
    via_py = sorted_rows(table.scan(snapshot_id=oldest).to_arrow())
    via_duck = sorted_rows(iceberg_con.execute(
        f"SELECT * FROM iceberg_scan('{table.metadata_location}', snapshot_from_id := {oldest})").to_arrow_table())
    assert via_py == via_duck and len(via_py) == 7 * 5

    # pyiceberg on the twin keeps the same snapshots (it deletes no files; we do).
    twin_table = other.load_table(f"{c.NAMESPACE}.hist")
    cutoff = int(time.time() * 1000) - 7 * DAY_MS
    twin_table.maintenance.expire_snapshots().older_than(dt.datetime.fromtimestamp(cutoff / 1000)).commit()
    assert snapshot_ids(other.load_table(f"{c.NAMESPACE}.hist")) == snapshot_ids(table)

    # Nothing left to expire: no commit.
    assert expire(con, catalog, "hist") == []
    assert catalog.load_table(f"{c.NAMESPACE}.hist").metadata_location == table.metadata_location


def test_compact_then_expire_deletes_the_replaced_small_files(con, iceberg_con, catalog):
    table = c.build_identity_date(catalog)
    before = pyiceberg_rows(table)
    small = {r["file_path"] for r in table.inspect.files().to_pylist() if r["file_size_in_bytes"] < 1024 * 1024}
    result = compact(con, f"{c.NAMESPACE}.by_date", catalog_uri=catalog.test_uri,
                     small_file_threshold_mb=1.0, target_file_size_mb=8.0)
    assert any(r["verdict"] == "compacted" for r in result)
    table = catalog.load_table(f"{c.NAMESPACE}.by_date")
    live_after = {r["file_path"] for r in table.inspect.files().to_pylist()}
    replaced = small - live_after
    assert replaced and all(os.path.exists(c.local_path(p)) for p in replaced), "compaction keeps old files"
    n = len(table.metadata.snapshots)
    table = backdate(catalog, "by_date", {i: 30 - i for i in range(n - 1)})

    rows = expire(con, catalog, "by_date")
    deleted = {r["path"] for r in rows if r["kind"] == "data_file" and r["action"] == "deleted"}
    assert deleted == replaced
    assert not any(os.path.exists(c.local_path(p)) for p in replaced)
    assert all(os.path.exists(c.local_path(p)) for p in live_after), "the compacted and untouched files stay"
    assert {r["kind"] for r in rows} >= {"snapshot", "manifest_list", "manifest", "data_file"}
    table = catalog.load_table(f"{c.NAMESPACE}.by_date")
    assert len(table.metadata.snapshots) == 1
    assert pyiceberg_rows(table) == before
    assert duckdb_rows(iceberg_con, table.metadata_location) == before
    assert_all_needed_files_exist(table)
    summary = json.loads(con.execute(
        f"SELECT lakehouse_expire_snapshots('{c.NAMESPACE}.by_date', '{{\"catalog_uri\": \"{catalog.test_uri}\"}}')"
    ).fetchone()[0])
    assert summary["snapshots_expired"] == 0 and summary["bytes_reclaimed"] == 0


def test_branch_and_tag_keep_their_snapshots(con, iceberg_con, catalog, tmp_path):
    table = build_history(catalog, 8)
    ids = snapshot_ids(table)
    table.manage_snapshots().create_tag(ids[1], "audit").create_branch(ids[3], "staging").commit()
    table = backdate(catalog, "hist", {i: 20 - i for i in range(8)})
    other = twin(catalog, tmp_path)
    rows = expire(con, catalog, "hist")
    table = catalog.load_table(f"{c.NAMESPACE}.hist")
    kept = set(snapshot_ids(table))
    assert kept == {ids[1], ids[3], ids[7]}, (kept, ids)
    assert table.metadata.refs["audit"].snapshot_id == ids[1]
    assert table.metadata.refs["staging"].snapshot_id == ids[3]
    assert sorted(r["snapshot_id"] for r in rows if r["kind"] == "snapshot") == sorted(set(ids) - kept)
    # The tagged snapshot still reads through both readers.
    tagged = sorted_rows(table.scan(snapshot_id=ids[1]).to_arrow())
    assert len(tagged) == 10
    assert tagged == sorted_rows(iceberg_con.execute(
        f"SELECT * FROM iceberg_scan('{table.metadata_location}', snapshot_from_id := {ids[1]})").to_arrow_table())
    assert_all_needed_files_exist(table)
    twin_table = other.load_table(f"{c.NAMESPACE}.hist")
    twin_table.maintenance.expire_snapshots().older_than(dt.datetime.now() - dt.timedelta(days=7)).commit()
    assert set(snapshot_ids(other.load_table(f"{c.NAMESPACE}.hist"))) == kept


def test_retain_last_and_table_properties(con, catalog):
    table = build_history(catalog, 8)
    ids = snapshot_ids(table)
    table = backdate(catalog, "hist", {i: 20 - i for i in range(8)})
    dry = expire(con, catalog, "hist", retain_last=3, dry_run=True)
    assert sorted(r["snapshot_id"] for r in dry if r["kind"] == "snapshot") == sorted(ids[:5])
    # Without a parameter the table's own history.expire.* properties decide.
    with table.transaction() as tx:
        tx.set_properties({"history.expire.min-snapshots-to-keep": "6"})
    dry = expire(con, catalog, "hist", dry_run=True)
    assert len([r for r in dry if r["kind"] == "snapshot"]) == 2  # 8 snapshots, 6 kept
    with catalog.load_table(f"{c.NAMESPACE}.hist").transaction() as tx:
        tx.set_properties({"history.expire.max-snapshot-age-ms": str(100 * DAY_MS)})
    assert [r for r in expire(con, catalog, "hist", dry_run=True) if r["kind"] == "snapshot"] == []
    # An explicit parameter overrides the property.
    assert len([r for r in expire(con, catalog, "hist", snapshot_retention_days=7, retain_last=1, dry_run=True)
                if r["kind"] == "snapshot"]) == 7
    with catalog.load_table(f"{c.NAMESPACE}.hist").transaction() as tx:
        tx.set_properties({"gc.enabled": "false"})
    with pytest.raises(Exception, match=f"{FN}: .*gc.enabled"):
        expire(con, catalog, "hist", snapshot_retention_days=0)


def test_a_file_outside_the_table_location_is_never_touched(con, iceberg_con, catalog, tmp_path):
    table = catalog.create_table(f"{c.NAMESPACE}.outside", schema=c._DATE_SCHEMA, partition_spec=c._DATE_SPEC)
    outside = tmp_path / "elsewhere" / "f.parquet"
    outside.parent.mkdir()
    con.execute(f"COPY (SELECT range::BIGINT AS id, DATE '2026-10-01' AS event_date, 'x' AS payload "
                f"FROM range(20)) TO '{outside}' (FORMAT parquet)")
    table.add_files([str(outside)])
    table = catalog.load_table(f"{c.NAMESPACE}.outside")
    table.overwrite(c._date_rows(range(100, 105), dt.date(2026, 10, 1)))
    table = catalog.load_table(f"{c.NAMESPACE}.outside")
    before = pyiceberg_rows(table)
    n = len(table.metadata.snapshots)
    backdate(catalog, "outside", {i: 30 - i for i in range(n - 1)})
    rows = expire(con, catalog, "outside")
    (row,) = [r for r in rows if r["path"] and r["path"].endswith("elsewhere/f.parquet")]
    assert row["action"] == "kept: outside the table location"
    assert outside.exists()
    table = catalog.load_table(f"{c.NAMESPACE}.outside")
    assert pyiceberg_rows(table) == before == duckdb_rows(iceberg_con, table.metadata_location)


def test_metadata_health_and_orphan_files(con, iceberg_con, catalog):
    build_history(catalog, 6)
    table = backdate(catalog, "hist", {i: 10 - i for i in range(3)})
    root = Path(c.local_path(table.location()))
    cur = con.execute(
        f"SELECT * FROM lakehouse_metadata_health('{c.NAMESPACE}.hist', catalog_uri := '{catalog.test_uri}')")
    health = dict(zip([d[0] for d in cur.description], cur.fetchone()))
    assert health["snapshots"] == 6
    assert health["snapshots_past_retention"] == 3 and health["expirable_snapshots"] == 3
    assert health["requires_expiry"] and health["metadata_bloated"]
    assert health["manifests"] == len(table.current_snapshot().manifests(table.io))
    assert health["data_files"] == len(table.inspect.files())
    assert health["metadata_files"] == len(list((root / "metadata").glob("*.metadata.json")))
    assert health["orphan_files"] == 0

    # An old orphan (left by a crashed writer) and a young one (a write in flight).
    old = root / "data" / "partition_date=2026-10-01" / "crashed-writer.parquet"
    old.write_bytes(b"PAR1 not really")
    os.utime(old, (time.time() - 5 * 86400, time.time() - 5 * 86400))
    young = root / "data" / "in-flight.parquet"
    young.write_bytes(b"PAR1 still being written")
    health = con.execute(
        f"SELECT orphan_files, orphan_bytes, requires_orphan_cleanup, reason FROM lakehouse_metadata_health("
        f"'{c.NAMESPACE}.hist', catalog_uri := '{catalog.test_uri}')").fetchone()
    assert health[:3] == (1, old.stat().st_size, True) and "orphan" in health[3]

    def orphans(**params):
        args = "".join(f", {k} := {str(v).lower() if isinstance(v, bool) else v}" for k, v in params.items())
        return con.execute(f"SELECT path, action FROM lakehouse_remove_orphan_files('{c.NAMESPACE}.hist', "
                           f"catalog_uri := '{catalog.test_uri}'{args})").fetchall()

    assert orphans() == [(str(old), "would delete")], "dry run by default"
    assert old.exists()
    assert orphans(dry_run=False) == [(str(old), "deleted")]
    assert not old.exists() and young.exists()
    # Below a day the window needs allow_young_orphans (a dry run lists them anyway).
    with pytest.raises(Exception, match="lakehouse_remove_orphan_files: older_than_days 0 is below 1 day"):
        orphans(older_than_days=0, dry_run=False)
    assert young.exists()
    assert orphans(older_than_days=0) == [(str(young), "would delete")]
    # With no safety window, on purpose, the young file goes too; every referenced file stays.
    assert orphans(older_than_days=0, allow_young_orphans=True, dry_run=False) == [(str(young), "deleted")]
    table = catalog.load_table(f"{c.NAMESPACE}.hist")
    assert_all_needed_files_exist(table)
    assert len(pyiceberg_rows(table)) == 30
    assert duckdb_rows(iceberg_con, table.metadata_location) == pyiceberg_rows(table)
    # Old metadata files are referenced by the metadata log: none of them is an orphan.
    assert orphans(older_than_days=0) == []


def test_nested_table_under_the_location_is_not_searched(con, catalog):
    table = build_history(catalog, 2)
    root = Path(c.local_path(table.location()))
    nested = root / "data" / "nested"
    con.execute(f"SELECT * FROM lakehouse_demo('{nested}', snapshots := 2)")
    got = con.execute(f"SELECT count(*) FROM lakehouse_remove_orphan_files('{c.NAMESPACE}.hist', "
                      f"catalog_uri := '{catalog.test_uri}', older_than_days := 0)").fetchone()
    assert got == (0,)


def test_expire_a_demo_table_by_path_then_readers_agree(con, iceberg_con, tmp_path):
    path = tmp_path / "demo"
    con.execute(f"SELECT * FROM lakehouse_demo('{path}', snapshots := 12, history_days := 14)")
    before = duckdb_rows(iceberg_con, str(path))
    compact(con, str(path), small_file_threshold_mb=0.064, target_file_size_mb=0.128)
    rows = con.execute(f"SELECT kind, path, action FROM {FN}('{path}', snapshot_retention_days := 0)").fetchall()
    kinds = {k for k, _, _ in rows}
    assert {"snapshot", "manifest_list", "data_file"} <= kinds
    assert all(a in ("expired", "deleted") for _, _, a in rows)
    assert duckdb_rows(iceberg_con, str(path)) == before
    from pyiceberg.table import StaticTable
    hint = (path / "metadata" / "version-hint.text").read_text().strip()
    static = StaticTable.from_metadata(str(path / "metadata" / f"v{hint}.metadata.json"))
    assert len(static.metadata.snapshots) == 1
    assert sorted_rows(static.scan().to_arrow()) == before
    assert_all_needed_files_exist(static)


def test_concurrent_append_during_expiry_is_kept(con, iceberg_con, catalog, monkeypatch):
    """The table moves on between plan and commit: the expiry starts over on the new head and
    the concurrent append survives."""
    import threading

    build_history(catalog, 6)
    table = backdate(catalog, "hist", {i: 20 - i for i in range(4)})
    ids = snapshot_ids(table)
    before = pyiceberg_rows(table)
    extra = c._date_rows(range(900, 903), dt.date(2026, 10, 1))
    monkeypatch.setenv("LAKEHOUSE_TEST_PAUSE_BEFORE_COMMIT_MS", "1500")
    outcome: dict = {}

    def run():
        try:
            outcome["rows"] = expire(con, catalog, "hist")
        except Exception as e:  # noqa: BLE001 - reported below
            outcome["error"] = str(e)

    worker = threading.Thread(target=run)
    worker.start()
    time.sleep(0.7)
    catalog.load_table(f"{c.NAMESPACE}.hist").append(extra)
    worker.join(timeout=60)
    assert "error" not in outcome, outcome
    assert sorted(r["snapshot_id"] for r in outcome["rows"] if r["kind"] == "snapshot") == sorted(ids[:4])
    table = catalog.load_table(f"{c.NAMESPACE}.hist")
    assert len(table.metadata.snapshots) == 3, "two retained + the concurrent append"
    # Our commit came last (after the append), so it was rebased onto the append's head.
    assert table.metadata_location == outcome["rows"][0]["metadata_location"]
    expected = sorted(before + sorted_rows(extra), key=repr)
    assert pyiceberg_rows(table) == expected
    assert duckdb_rows(iceberg_con, table.metadata_location) == expected
    assert_all_needed_files_exist(table)


@pytest.mark.parametrize("delete_after_commit", [False, True])
def test_metadata_files_beyond_previous_versions_max(con, catalog, delete_after_commit):
    """As in Java: metadata files that fall out of the log are deleted only with
    write.metadata.delete-after-commit.enabled; otherwise they stay, metadata health reports
    them, and orphan removal finds them."""
    table = build_history(catalog, 4)
    with table.transaction() as tx:
        tx.set_properties({"write.metadata.previous-versions-max": "2"})
    table = backdate(catalog, "hist", {i: 20 - i for i in range(3)})
    if delete_after_commit:
        # Set in the metadata copy (pyiceberg itself would delete on its own commit).
        path = Path(c.local_path(table.metadata_location))
        meta = json.loads(path.read_text())
        meta["properties"]["write.metadata.delete-after-commit.enabled"] = "true"
        path.write_text(json.dumps(meta))
        table = catalog.load_table(f"{c.NAMESPACE}.hist")
    log_before = [c.local_path(m.metadata_file) for m in table.metadata.metadata_log]
    assert len(log_before) >= 2

    def unlogged():
        return con.execute(
            f"SELECT unlogged_metadata_files, reason FROM lakehouse_metadata_health('{c.NAMESPACE}.hist', "
            f"catalog_uri := '{catalog.test_uri}')").fetchone()

    unlogged_before = unlogged()[0]  # pyiceberg's own commits dropped some from the log already
    rows = expire(con, catalog, "hist")
    dropped = [r["path"] for r in rows if r["kind"] == "metadata_file"]
    table = catalog.load_table(f"{c.NAMESPACE}.hist")
    log_after = [c.local_path(m.metadata_file) for m in table.metadata.metadata_log]
    assert len(log_after) == 2
    fallen_out = set(log_before) - set(log_after)
    assert fallen_out
    assert all(os.path.exists(p) for p in log_after)
    assert os.path.exists(c.local_path(table.metadata_location))
    health = unlogged()
    if delete_after_commit:
        assert {c.local_path(p) for p in dropped} == fallen_out
        assert not any(os.path.exists(p) for p in fallen_out)
        assert health[0] == unlogged_before
    else:
        assert dropped == [], "kept, as Java keeps them"
        assert all(os.path.exists(p) for p in fallen_out)
        assert health[0] == unlogged_before + len(fallen_out) and "no longer in the metadata log" in health[1]


def test_a_path_without_an_exclusive_commit_is_refused_but_can_be_planned(con, catalog):
    """pyiceberg's SQL catalog writes `<N>-<uuid>.metadata.json` and no version hint: named by its
    metadata file, the table's real pointer is the catalog's, which our commit would not move."""
    build_history(catalog, 4)
    table = backdate(catalog, "hist", {i: 20 - i for i in range(3)})
    path = c.local_path(table.metadata_location)
    dry = con.execute(f"SELECT count(*) FROM {FN}('{path}', dry_run := true) WHERE kind = 'snapshot'").fetchone()
    assert dry == (3,)
    with pytest.raises(Exception, match=f"{FN}: .*name the table through its catalog"):
        con.execute(f"SELECT * FROM {FN}('{path}')").fetchall()
    assert catalog.load_table(f"{c.NAMESPACE}.hist").metadata_location == table.metadata_location
    assert_all_needed_files_exist(catalog.load_table(f"{c.NAMESPACE}.hist"))


def test_statistics_files_of_expired_snapshots_are_deleted(con, catalog):
    """A statistics (Puffin) file registered for an old snapshot goes with it; one registered
    for a retained snapshot stays."""
    build_history(catalog, 4)
    table = backdate(catalog, "hist", {i: 20 - i for i in range(3)})
    ids = snapshot_ids(table)
    root = Path(c.local_path(table.location()))
    old_stats, kept_stats = root / "metadata" / "old.stats", root / "metadata" / "kept.stats"
    old_stats.write_bytes(b"PUF1 old")
    kept_stats.write_bytes(b"PUF1 kept")
    path = Path(c.local_path(table.metadata_location))
    meta = json.loads(path.read_text())
    meta["statistics"] = [
        {"snapshot-id": sid, "statistics-path": f"file://{p}", "file-size-in-bytes": p.stat().st_size,
         "file-footer-size-in-bytes": 4, "blob-metadata": []}
        for sid, p in ((ids[0], old_stats), (ids[3], kept_stats))
    ]
    path.write_text(json.dumps(meta))
    rows = expire(con, catalog, "hist")
    stats_rows = [(r["snapshot_id"], r["action"]) for r in rows if r["kind"] == "statistics_file"]
    assert stats_rows == [(ids[0], "deleted")]
    assert not old_stats.exists() and kept_stats.exists()
    table = catalog.load_table(f"{c.NAMESPACE}.hist")
    assert [s.snapshot_id for s in table.metadata.statistics] == [ids[3]]


def test_a_pyiceberg_v1_table_is_expired_and_cleaned(con, catalog):
    """pyiceberg writes v1 manifest lists with field 504 named ``added_files_count`` (Java's v1
    name is ``added_data_files_count``); iceberg-rust's v1 schema then reads no file counts. The
    test builds cross-check the lean list reader against iceberg-rust on every list, and failed
    every expiry and orphan removal of such a table (found by the chaos harness, seed 8)."""
    import pyarrow as pa
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField

    table = catalog.create_table(f"{c.NAMESPACE}.v1", Schema(NestedField(1, "id", LongType())),
                                 properties={"format-version": "1"})
    for i in range(3):
        table.append(pa.table({"id": pa.array([i], pa.int64())}))
    ref = f"'{c.NAMESPACE}.v1', catalog_uri := '{catalog.test_uri}'"
    con.execute(f"SELECT * FROM lakehouse_expire_snapshots({ref}, snapshot_retention_days := 0, retain_last := 1, "
                "dry_run := false)").fetchall()
    assert len(catalog.load_table(f"{c.NAMESPACE}.v1").snapshots()) == 1
    con.execute(f"SELECT * FROM lakehouse_remove_orphan_files({ref}, older_than_days := 0, "
                "allow_young_orphans := true, dry_run := false)").fetchall()
    assert sorted(catalog.load_table(f"{c.NAMESPACE}.v1").scan().to_arrow()["id"].to_pylist()) == [0, 1, 2]
