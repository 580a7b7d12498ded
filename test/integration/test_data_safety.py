"""Data safety: no resurrected rows, no lost commits, no wrong partitions.

Each test builds the hazard with writers we did not write (pyiceberg; delete files laid out as
the spec says and committed through pyiceberg's snapshot producer) and checks the outcome with
readers we did not write: DuckDB's iceberg extension (which applies position and equality
deletes, global ones included), pyiceberg, and pyarrow on the data files themselves.
"""

from __future__ import annotations

import datetime as dt
import gzip
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.expressions import IsNull
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table.refs import SnapshotRefType
from pyiceberg.table.update import AssertRefSnapshotId, SetSnapshotRefUpdate
from pyiceberg.transforms import IdentityTransform
from pyiceberg.typedef import Record
from pyiceberg.types import LongType, NestedField, StringType

import conftest as c
from test_compact_iceberg import compact, duckdb_rows, pyiceberg_rows

SMALL = {"small_file_threshold_mb": 1.0, "target_file_size_mb": 8.0}


def while_paused(run, concurrent_change, root: Path, monkeypatch) -> dict:
    """Runs `run()` with its commit held back until `concurrent_change()` has committed, once the
    rewrite has written an output (conftest.run_paused_before_commit)."""
    return c.run_paused_before_commit(run, concurrent_change, lambda: bool(list(root.rglob("*-compacted.parquet"))), monkeypatch)


def compact_by_date_while(con, catalog, concurrent_change, monkeypatch) -> dict:
    root = Path(c.local_path(catalog.load_table(f"{c.NAMESPACE}.by_date").location()))
    run = lambda: compact(con, f"{c.NAMESPACE}.by_date", catalog_uri=catalog.test_uri, **SMALL)  # noqa: E731
    return while_paused(run, concurrent_change, root, monkeypatch)


def _day(d: int) -> int:
    return (dt.date(2026, 10, d) - dt.date(1970, 1, 1)).days


def _by_date_files(table, day: int) -> list:
    return [f for f in c.live_data_files(table) if f.partition[0] == _day(day)]


# --------------------------------------------------------------------------- deletes


def test_global_equality_deletes_keep_applying_after_partition_evolution(con, iceberg_con, catalog):
    """A partitioned table loses its partition field (spec 1 is unpartitioned); an equality
    delete written then is global: it applies to the older files of spec 0. Those partitions are
    not delete-free, so they must not be rewritten without applying it."""
    schema = Schema(NestedField(1, "id", LongType(), required=False), NestedField(2, "cat", StringType(), required=False))
    spec = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="cat"))
    table = catalog.create_table(f"{c.NAMESPACE}.evolving", schema=schema, partition_spec=spec)
    for i in range(3):
        for k, base in (("a", 0), ("b", 50)):
            ids = range(i * 100 + base, i * 100 + base + 10)
            table.append(pa.table({"id": pa.array(ids, pa.int64()), "cat": [k] * 10}))
    with table.update_spec() as update:
        update.remove_field("cat")
    table = table.refresh()
    assert not table.spec().fields, "spec 1 is unpartitioned"
    delete = c.equality_delete_file(table, Record(), "id", [1, 2, 150])
    table = c.commit_files(table, [delete], deletes=True)
    before = duckdb_rows(iceberg_con, table.metadata_location)
    assert len(before) == 57, "DuckDB applies the global delete to spec 0's files"

    profile = con.execute(
        f"SELECT partition, delete_files FROM lakehouse_fragmentation('{c.NAMESPACE}.evolving', "
        f"catalog_uri := '{catalog.test_uri}', small_file_threshold_mb := 1.0)"
    ).fetchall()
    assert sorted(profile) == [("cat=a", 1), ("cat=b", 1)]
    result = compact(con, f"{c.NAMESPACE}.evolving", catalog_uri=catalog.test_uri, apply_deletes=False, **SMALL)
    assert [r["reason"] for r in result] == ["skipped: has 1 delete files"] * 2, result
    table = catalog.load_table(f"{c.NAMESPACE}.evolving")
    assert duckdb_rows(iceberg_con, table.metadata_location) == before
    # Applied (the default): both partitions rewritten without the deleted rows; the global
    # delete then applies to no live file (the new files take the starting sequence number) and
    # is removed.
    result = compact(con, f"{c.NAMESPACE}.evolving", catalog_uri=catalog.test_uri, **SMALL)
    assert [(r["verdict"], r["delete_files"], r["delete_files_removed"]) for r in result] == [("compacted", 1, 1)] * 2
    table = catalog.load_table(f"{c.NAMESPACE}.evolving")
    assert duckdb_rows(iceberg_con, table.metadata_location) == before
    assert pyiceberg_rows(table) == before
    assert [f["content"] for f in table.inspect.files().to_pylist()] == [0, 0]


def test_equality_delete_committed_during_the_rewrite_still_applies(con, iceberg_con, catalog, monkeypatch):
    """New files take the starting snapshot's data sequence number: an equality delete committed
    while the rewrite ran (a later sequence number) applies to them as it did to their inputs."""
    table = c.build_identity_date(catalog)
    start_seq = table.metadata.current_snapshot().sequence_number
    doomed = [0, 21, 40]  # rows of three different small files of 2026-10-01

    def concurrent_delete():
        t = catalog.load_table(f"{c.NAMESPACE}.by_date")
        partition = _by_date_files(t, 1)[0].partition
        c.commit_files(t, [c.equality_delete_file(t, partition, "id", doomed)], deletes=True)

    before = pyiceberg_rows(table)
    outcome = compact_by_date_while(con, catalog, concurrent_delete, monkeypatch)
    assert "error" not in outcome, outcome
    table = catalog.load_table(f"{c.NAMESPACE}.by_date")
    assert table.metadata.current_snapshot().summary.operation.value == "replace"
    expected = [r for r in before if r[1] not in doomed]  # columns sorted: event_date, id, payload
    assert len(expected) == len(before) - 3
    assert duckdb_rows(iceberg_con, table.metadata_location) == expected, "a deleted row came back"
    added = [
        e
        for m in table.current_snapshot().manifests(table.io)
        for e in m.fetch_manifest_entry(table.io, discard_deleted=False)
        if e.status.value == 1 and e.data_file.content.value == 0
    ]
    assert added and {e.sequence_number for e in added} == {start_seq}, "the starting data sequence number"


def test_position_delete_committed_during_the_rewrite_aborts_it(con, iceberg_con, catalog, monkeypatch):
    """A position delete against a file being replaced names a path and positions the new files do
    not have: the rewrite must not commit (Java's validateNoNewDeletesForDataFiles)."""
    table = c.build_identity_date(catalog)
    root = Path(c.local_path(table.location()))
    target = sorted(_by_date_files(table, 1), key=lambda f: f.file_path)[0]
    doomed = pq.read_table(c.local_path(target.file_path)).column("id").to_pylist()[:2]

    def concurrent_delete():
        t = catalog.load_table(f"{c.NAMESPACE}.by_date")
        c.commit_files(t, [c.position_delete_file(t, target, [0, 1])], deletes=True)

    before = pyiceberg_rows(table)
    outcome = compact_by_date_while(con, catalog, concurrent_delete, monkeypatch)
    assert "commit conflict: a delete committed while compacting" in outcome.get("error", ""), outcome
    assert not list(root.rglob("*-compacted.parquet")), "rewritten files must be removed"
    table = catalog.load_table(f"{c.NAMESPACE}.by_date")
    assert table.metadata.current_snapshot().summary.operation.value == "delete"
    expected = [r for r in before if r[1] not in doomed]
    assert duckdb_rows(iceberg_con, table.metadata_location) == expected


# --------------------------------------------------------------------------- partitions


def _files_hold_their_partition(table, columns: list[str]) -> None:
    """Every live data file's rows carry exactly the partition tuple its manifest entry says."""
    for f in c.live_data_files(table):
        rows = pq.read_table(c.local_path(f.file_path)).select(columns).to_pylist()
        want = dict(zip(columns, list(f.partition)))
        assert rows and all(r == want for r in rows), (f.file_path, want, rows[:3])


def test_partitions_that_print_alike_are_never_merged(con, iceberg_con, catalog):
    """The string "null" and a real NULL print alike, and so do ('x/b=y', 'z') and ('x', 'y/b=z'):
    each tuple is its own partition, and each output file keeps its own tuple."""
    schema = Schema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(2, "a", StringType(), required=False),
        NestedField(3, "b", StringType(), required=False),
    )
    spec = PartitionSpec(
        PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="a"),
        PartitionField(source_id=3, field_id=1001, transform=IdentityTransform(), name="b"),
    )
    table = catalog.create_table(f"{c.NAMESPACE}.alike", schema=schema, partition_spec=spec)
    tuples = [("null", "k"), (None, "k"), ("x/b=y", "z"), ("x", "y/b=z")]
    for i in range(3):
        for j, (a, b) in enumerate(tuples):
            ids = range(i * 100 + j * 10, i * 100 + j * 10 + 5)
            table.append(pa.table({"id": pa.array(ids, pa.int64()), "a": pa.array([a] * 5, pa.string()),
                                   "b": pa.array([b] * 5, pa.string())}))
    table = table.refresh()
    before = pyiceberg_rows(table)
    profile = con.execute(
        f"SELECT partition, total_files FROM lakehouse_fragmentation('{c.NAMESPACE}.alike', "
        f"catalog_uri := '{catalog.test_uri}') ORDER BY ALL"
    ).fetchall()
    assert profile == [("a=null/b=k", 3), ("a=null/b=k", 3), ("a=x/b=y/b=z", 3), ("a=x/b=y/b=z", 3)]
    result = compact(con, f"{c.NAMESPACE}.alike", catalog_uri=catalog.test_uri, **SMALL)
    assert [r["files_after"] for r in result] == [1, 1, 1, 1], result
    table = catalog.load_table(f"{c.NAMESPACE}.alike")
    _files_hold_their_partition(table, ["a", "b"])
    assert pyiceberg_rows(table) == before
    assert duckdb_rows(iceberg_con, table.metadata_location) == before
    assert table.scan(row_filter=IsNull("a")).to_arrow().num_rows == 15


# --------------------------------------------------------------------------- commits


def test_compaction_keeps_the_main_branch_retention_and_other_refs(con, catalog):
    table = c.build_identity_date(catalog)
    head = table.metadata.current_snapshot_id
    first = table.metadata.snapshots[0].snapshot_id
    with table.manage_snapshots() as ms:
        ms.create_tag(first, "audit", max_ref_age_ms=86_400_000)
        ms.create_branch(first, "dev", max_ref_age_ms=5 * 86_400_000, max_snapshot_age_ms=3_600_000,
                         min_snapshots_to_keep=4)
    table = table.refresh()
    with table.transaction() as tx:
        tx._apply(
            (SetSnapshotRefUpdate(ref_name="main", type=SnapshotRefType.BRANCH, snapshot_id=head,
                                  max_ref_age_ms=None, max_snapshot_age_ms=2 * 86_400_000, min_snapshots_to_keep=9),),
            (AssertRefSnapshotId(ref="main", snapshot_id=head),),
        )
    table = catalog.load_table(f"{c.NAMESPACE}.by_date")
    def refs(t) -> dict:
        return {name: {"snapshot_id": r.snapshot_id, "type": str(r.snapshot_ref_type), "min": r.min_snapshots_to_keep,
                       "age": r.max_snapshot_age_ms, "ref_age": r.max_ref_age_ms} for name, r in t.metadata.refs.items()}

    refs_before = refs(table)
    assert refs_before["main"]["min"] == 9 and refs_before["dev"]["min"] == 4
    result = compact(con, f"{c.NAMESPACE}.by_date", catalog_uri=catalog.test_uri, **SMALL)
    assert result[0]["snapshot_id"] is not None
    table = catalog.load_table(f"{c.NAMESPACE}.by_date")
    refs_after = refs(table)
    assert refs_after["main"] == {**refs_before["main"], "snapshot_id": result[0]["snapshot_id"]}
    assert {k: v for k, v in refs_after.items() if k != "main"} == {k: v for k, v in refs_before.items() if k != "main"}


def test_compaction_refuses_a_path_table_without_an_exclusive_commit(con, catalog):
    """pyiceberg names metadata `<N>-<uuid>.metadata.json` and writes no hint: named by that path,
    a commit could not exclude a concurrent writer (and the catalog would not follow)."""
    table = c.build_identity_date(catalog)
    path = c.local_path(table.metadata_location)
    root = Path(c.local_path(table.location()))
    dry = compact(con, path, dry_run=True, **SMALL)
    assert any(r["verdict"] == "would compact" for r in dry), dry
    listing = sorted(str(p) for p in root.rglob("*"))
    with pytest.raises(Exception, match="lakehouse_compact: .*could not exclude other writers"):
        compact(con, path, **SMALL)
    assert sorted(str(p) for p in root.rglob("*")) == listing, "nothing written"
    assert catalog.load_table(f"{c.NAMESPACE}.by_date").metadata_location == table.metadata_location


def test_a_lagging_version_hint_is_followed_not_overwritten(con, iceberg_con, tmp_path):
    """A commit creates v{N+1} before it moves the hint; a reader that trusts a lagging hint sees
    an old table, and a writer based on it would fail or fork. Both follow v{N+1}, v{N+2}, …"""
    path = tmp_path / "demo"
    con.execute(f"SELECT * FROM lakehouse_demo('{path}')").fetchall()
    first = compact(con, str(path), small_file_threshold_mb=0.064, target_file_size_mb=0.128)
    assert first[0]["metadata_location"].endswith("v17.metadata.json")
    hint = path / "metadata" / "version-hint.text"
    hint.write_text("16")  # as if the writer of v17 had not moved the hint yet
    files = dict(con.execute(f"SELECT partition, total_files FROM lakehouse_fragmentation('{path}', "
                             "small_file_threshold_mb := 0.064)").fetchall())
    assert files["partition_date=2026-10-01"] < 52, "the profile reads v17, not the hinted v16"
    rows = duckdb_rows(iceberg_con, str(path / "metadata" / "v17.metadata.json"))
    second = compact(con, str(path), small_file_threshold_mb=0.064, target_file_size_mb=0.128,
                     fragmentation_ratio_threshold=0.0)
    committed = {r["metadata_location"] for r in second if r["snapshot_id"] is not None}
    assert len(committed) == 1 and committed.pop().endswith("v18.metadata.json"), second
    assert hint.read_text().strip() == "18"
    assert duckdb_rows(iceberg_con, str(path)) == rows


def test_a_conflict_is_reported_as_retryable_not_as_corruption(con, catalog, monkeypatch):
    """The gate's alert for a commit conflict says the next run retries, not that the table failed
    (without partial progress: with it, the partition is retried, test_partial_progress)."""
    from test_gate import FakeSlack

    slack = FakeSlack()
    try:
        monkeypatch.setenv("SLACK_WEBHOOK_URL", slack.url)
        table = c.build_identity_date(catalog)
        target = _by_date_files(table, 1)[0]

        def run():
            return con.execute(f"SELECT * FROM lakehouse_gate('{c.NAMESPACE}.by_date', catalog_uri := "
                               f"'{catalog.test_uri}', small_file_threshold_mb := 1.0, "
                               "target_file_size_mb := 8.0, partial_progress := false)").fetchall()

        def concurrent_delete():
            t = catalog.load_table(f"{c.NAMESPACE}.by_date")
            c.commit_files(t, [c.position_delete_file(t, target, [0])], deletes=True)

        outcome = while_paused(run, concurrent_delete, Path(c.local_path(table.location())), monkeypatch)
        assert "commit conflict" in outcome.get("error", ""), outcome
        (alert,) = [r["body"] for r in slack.requests]
        assert "next run retries" in alert["text"] and "failed" not in alert["text"], alert
    finally:
        slack.close()


# --------------------------------------------------------------------------- interrupts


def test_ctrl_c_in_the_cli_stops_before_the_commit(tmp_path):
    """Ctrl-C in the DuckDB CLI while a compaction waits to commit: it stops there, nothing is
    committed, and what it wrote is removed."""
    path = tmp_path / "demo"
    import duckdb_cli

    duckdb = str(Path(duckdb_cli.__file__).parent / "duckdb")  # the binary, not the pip wrapper script
    ext = c.lakehouse_extension_path()
    if not ext.is_file():
        pytest.skip("extension not built")
    setup = subprocess.run([duckdb, "-unsigned", "-c", f"LOAD '{ext}'; SELECT * FROM lakehouse_demo('{path}');"],
                           capture_output=True, text=True, timeout=120)
    assert setup.returncode == 0, setup.stderr
    listing = sorted(str(p) for p in path.rglob("*"))
    env = {**os.environ, "LAKEHOUSE_TEST_PAUSE_BEFORE_COMMIT_MS": "20000"}
    sql = (f"LOAD '{ext}'; SELECT * FROM lakehouse_compact('{path}', small_file_threshold_mb := 0.064, "
           "target_file_size_mb := 0.128);")
    proc = subprocess.Popen([duckdb, "-unsigned", "-c", sql], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    deadline = time.monotonic() + 60
    # Wait until the rewrite is done (the outputs exist), then interrupt during the pause.
    while time.monotonic() < deadline and not list(path.rglob("*-compacted.parquet")):
        time.sleep(0.05)
    assert list(path.rglob("*-compacted.parquet")), "the rewrite never started"
    time.sleep(0.3)
    started = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert time.monotonic() - started < 15, "the pause of 20 s was not cut short"
    assert "interrupted" in (out + err).lower(), (out, err)
    assert sorted(str(p) for p in path.rglob("*")) == listing, "nothing committed, nothing left behind"
    assert (path / "metadata" / "version-hint.text").read_text().strip() == "16"


# --------------------------------------------------------------------------- metadata files


def test_gzip_metadata_is_read(con, catalog, tmp_path):
    table = c.build_identity_date(catalog)
    plain = Path(c.local_path(table.metadata_location))
    want = con.execute(f"SELECT * FROM lakehouse_fragmentation('{plain}') ORDER BY ALL").fetchall()
    for name in ("00099-a.gz.metadata.json", "00099-b.metadata.json.gz"):
        target = plain.parent / name
        target.write_bytes(gzip.compress(plain.read_bytes()))
        got = con.execute(f"SELECT * FROM lakehouse_fragmentation('{target}') ORDER BY ALL").fetchall()
        assert got == want, name


# --------------------------------------------------------------------------- loading


def test_extension_loads_in_a_python_process_that_imported_many_libraries(tmp_path):
    """dlopen'ed libraries must not need the static TLS block (mimalloc's default TLS model
    does): a Python process with pyarrow, pyiceberg, deltalake and dbt loaded has little left."""
    ext = c.lakehouse_extension_path()
    if not ext.is_file():
        pytest.skip("extension not built")
    dynamic = subprocess.run(["readelf", "-d", str(ext)], capture_output=True, text=True)
    if dynamic.returncode == 0:
        assert "STATIC_TLS" not in dynamic.stdout, "the library asks for static TLS"
    script = f"""
import pyarrow, pyarrow.parquet, pyiceberg.catalog.sql, deltalake, dbt.cli.main, duckdb
con = duckdb.connect(config={{"allow_unsigned_extensions": "true"}})
con.execute("SET enable_progress_bar = false")
con.execute("LOAD '{ext}'")
print(con.execute("SELECT data_files FROM lakehouse_demo('{tmp_path / 'demo'}')").fetchone()[0])
"""
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert int(run.stdout.strip()) > 100


# --------------------------------------------------------------------------- orphans


def test_orphan_removal_refuses_a_location_spelled_differently_from_its_files(con, iceberg_con, catalog):
    """The table's location is a symlink to where its files were written (or another mount of the
    same directory): listed under one spelling, named by the metadata under another, every live
    file would look like an orphan. Like Java's prefix_mismatch_mode=ERROR, nothing is deleted."""
    table = c.build_identity_date(catalog)
    real_root = Path(c.local_path(table.location()))
    link_root = real_root.parent / "by_date_link"
    link_root.symlink_to(real_root, target_is_directory=True)
    path = Path(c.local_path(table.metadata_location))
    meta = json.loads(path.read_text())
    meta["location"] = f"file://{link_root}"
    moved = path.with_name("00099-moved.metadata.json")
    moved.write_text(json.dumps(meta))
    old = time.time() - 5 * 86400
    for f in real_root.rglob("*"):
        os.utime(f, (old, old), follow_symlinks=False)
    rows = pyiceberg_rows(table)
    listing = sorted(str(p) for p in real_root.rglob("*"))
    with pytest.raises(Exception, match="lakehouse_remove_orphan_files: prefix mismatch: .* nothing was deleted"):
        con.execute(f"SELECT * FROM lakehouse_remove_orphan_files('{moved}', dry_run := false)").fetchall()
    assert sorted(str(p) for p in real_root.rglob("*")) == listing
    health = con.execute(f"SELECT orphan_files, reason FROM lakehouse_metadata_health('{moved}')").fetchone()
    assert health[0] is None and "prefix mismatch" in health[1]
    assert duckdb_rows(iceberg_con, table.metadata_location) == rows


# --------------------------------------------------------------------------- other engines' tables

FIXTURES = c.fixtures_dir() / "iceberg-foreign"


@pytest.mark.parametrize("name, deletes", [
    # Java API equality deletes in 3 of 6 identity partitions (one data file each)
    ("java-v2-identity-partitioned-equality-deletes", {"name=b": 1, "name=c": 1, "name=f": 1}),
    # Spark appends + Java equality deletes on an unpartitioned table: global deletes
    ("spark-java-v2-equality-deletes", {"(unpartitioned)": 4}),
])
def test_delete_files_written_by_java_are_counted_where_they_apply(con, iceberg_con, tmp_path, name, deletes):
    if not FIXTURES.is_dir():
        pytest.fail(f"the shared fixtures are not at {FIXTURES}: set LAKEHOUSE_FIXTURES")
    info = json.loads((FIXTURES / "fixtures.json").read_text())[name]
    table = tmp_path / name
    subprocess.run([sys.executable, str(FIXTURES / "relocate.py"), str(FIXTURES / name), str(table)], check=True,
                   capture_output=True)
    metadata = table / info["metadata"]
    rows = duckdb_rows(iceberg_con, str(metadata))
    assert len(rows) == info["rows_after_deletes_relocated"]
    profile = con.execute(f"SELECT partition, delete_files FROM lakehouse_fragmentation('{metadata}')").fetchall()
    assert {p: n for p, n in profile if n} == deletes
    # Every partition is tiny: with a ratio of 1 each with two files or more is degraded; with
    # apply_deletes := false none with deletes is touched (test_foreign_tables applies them). A
    # partition of one file has nothing to merge (issue 49): healthy, whatever its deletes.
    result = con.execute(
        f"SELECT partition, reason FROM lakehouse_compact('{metadata}', min_input_files := 2, apply_deletes := false)"
    ).fetchall()
    alone = "healthy: nothing to merge, 1 small file < min_input_files 2"
    assert all(reason in (f"skipped: has {deletes[p]} delete files", alone) for p, reason in result if p in deletes), \
        result
    assert duckdb_rows(iceberg_con, str(metadata)) == rows


# --------------------------------------------------------------------------- partition names Avro cannot hold


@pytest.mark.parametrize("column", ["event-date", "1st day", "día mes"])
def test_a_partition_name_avro_cannot_hold_keeps_its_values(con, iceberg_con, catalog, spark, column):
    """pyiceberg (as Java) writes a partition field `event-date` into a manifest's Avro schema as
    `event_x2Ddate`, with its field id. iceberg-rust resolved partition fields by name, read every
    value as null, and compaction committed the new files under a null partition: Spark (which
    takes identity values from the partition tuple) then read `event-date` as NULL in every row,
    and a pruning reader (pyiceberg, `= 'a'`) found no row (found while checking what the fuzzer
    found). And a manifest we wrote named the field `event-date`, which apache-avro refused to
    parse on the next run. Now values are read by field id and written under Avro-safe names."""
    from pyiceberg.expressions import EqualTo

    name = f"{c.NAMESPACE}.odd_names"
    table = catalog.create_table(
        name, Schema(NestedField(1, "id", LongType()), NestedField(2, column, StringType())),
        partition_spec=PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(),
                                                    name=column)))
    for i in range(6):
        table.append(pa.table({"id": pa.array([i], pa.int64()), column: pa.array(["a" if i < 3 else "b"])}))
    expected = sorted((i, "a" if i < 3 else "b") for i in range(6))
    ref = f"'{name}', catalog_uri := '{catalog.test_uri}'"
    labels = [r[0] for r in con.execute(f"SELECT partition FROM lakehouse_fragmentation({ref}) ORDER BY 1").fetchall()]
    assert [label.endswith("=a") for label in labels] == [True, False] and labels[1].endswith("=b"), labels
    compacted = compact(con, name, catalog_uri=catalog.test_uri, small_file_threshold_mb=1.0)
    assert sorted(r["verdict"] for r in compacted) == ["compacted", "compacted"], compacted
    # Our own manifests read back (the next run, and the manifest rewrite, decode them).
    con.execute(f"SELECT * FROM lakehouse_rewrite_manifests({ref}, dry_run := false)").fetchall()
    compact(con, name, catalog_uri=catalog.test_uri, small_file_threshold_mb=1.0)
    table = catalog.load_table(name)
    assert sorted(str(r["partition"][column]) for r in table.inspect.files().to_pylist()) == ["a", "b"]
    assert table.scan(row_filter=EqualTo(column, "a")).to_arrow().num_rows == 3
    assert sorted(zip(*table.scan().to_arrow().to_pydict().values())) == expected
    metadata = table.metadata_location
    assert sorted(iceberg_con.execute(f"SELECT * FROM iceberg_scan('{metadata}')").fetchall()) == expected
    frame = spark.read.format("iceberg").load(metadata)
    assert sorted(tuple(r) for r in frame.collect()) == expected
    assert frame.where(frame[column] == "a").count() == 3


def test_a_file_only_deleted_entries_name_is_an_orphan(con, catalog):
    """A file removed by a retained snapshot (a DELETED entry in its manifest) whose earlier
    snapshots are gone is read by no snapshot: Java's orphan removal takes live entries only
    (`ManifestFiles.readPaths`). Ours kept such files forever, so an expiry killed after its
    commit (the chaos harness, seed 917921912) left orphans no cleanup removed."""
    from pyiceberg.expressions import EqualTo

    name = f"{c.NAMESPACE}.only_deleted"
    table = catalog.create_table(name, Schema(NestedField(1, "id", LongType())))
    table.append(pa.table({"id": pa.array([1], pa.int64())}))
    first = table.current_snapshot().snapshot_id
    removed = [c.local_path(f["file_path"]) for f in table.inspect.files().to_pylist()]
    table.delete(EqualTo("id", 1))
    table.append(pa.table({"id": pa.array([2], pa.int64())}))
    table.maintenance.expire_snapshots().by_id(first).commit()  # pyiceberg deletes no file
    assert all(Path(p).exists() for p in removed)
    ref = f"'{name}', catalog_uri := '{catalog.test_uri}'"
    orphans = con.execute(f"SELECT path FROM lakehouse_remove_orphan_files({ref}, older_than_days := 0, "
                          "allow_young_orphans := true, dry_run := false)").fetchall()
    assert [c.local_path(r[0]) for r in orphans if r[0].endswith(".parquet")] == removed, orphans
    assert not any(Path(p).exists() for p in removed)
    table = catalog.load_table(name)
    assert table.scan().to_arrow()["id"].to_pylist() == [2]
    for snapshot in table.snapshots():  # every retained snapshot still reads
        table.scan(snapshot_id=snapshot.snapshot_id).to_arrow()
