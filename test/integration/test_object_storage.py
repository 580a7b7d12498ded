"""Tables on S3-compatible object storage behind Apache Iceberg's REST catalog.

Real servers, started here on loopback and stopped by PID: versitygw (an S3-compatible gateway
built from the Go module proxy, signature checking enforced, conditional writes) and Apache
Iceberg's REST catalog fixture (JDBC/sqlite, S3FileIO). pyiceberg and DuckDB (`ATTACH … (TYPE
iceberg)`) write fragmented tables through the catalog; our functions profile, compact, expire
and clean them; pyiceberg and DuckDB's iceberg extension read the rows back.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import DateType, DoubleType, LongType, NestedField, StringType

from conftest import load_iceberg, new_connection, pip_extension_path, run_paused_before_commit
from rest_catalog import RestCatalogServer
from s3_server import ACCESS_KEY_ID, SECRET_ACCESS_KEY, S3Server, duckdb_secret_sql, start_latency_proxy
from sigv4_proxy import SigV4Proxy

BUCKET = "lakehouse"
WAREHOUSE = f"s3://{BUCKET}/warehouse"
CATALOG = "prod"
SMALL = "small_file_threshold_mb := 1, target_file_size_mb := 2"


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
    catalog = rest.pyiceberg_catalog(CATALOG)
    catalog.create_namespace_if_not_exists("ns")
    return catalog


def write_config(home: Path, rest: RestCatalogServer, s3, secret: str = SECRET_ACCESS_KEY) -> None:
    """A `.pyiceberg.yaml` as a pyiceberg user writes it: the REST catalog and its S3 keys."""
    home.mkdir(parents=True, exist_ok=True)
    (home / ".pyiceberg.yaml").write_text(textwrap.dedent(f"""\
        default-catalog: {CATALOG}
        catalog:
          {CATALOG}:
            type: rest
            uri: {rest.uri}
            s3.endpoint: {s3.endpoint}
            s3.access-key-id: {ACCESS_KEY_ID}
            s3.secret-access-key: {secret}
            s3.region: us-east-1
            s3.path-style-access: "true"
        """))


@pytest.fixture
def env(clean_catalog_env, rest, s3, tmp_path):
    home = tmp_path / "pyiceberg-home"
    write_config(home, rest, s3)
    clean_catalog_env.setenv("PYICEBERG_HOME", str(home))
    return clean_catalog_env


@pytest.fixture
def s3con(s3) -> duckdb.DuckDBPyConnection:
    """DuckDB 1.5.5 with httpfs, iceberg and avro from the pip wheels and the S3 server's secret."""
    connection = new_connection()
    connection.execute(f"LOAD '{pip_extension_path('httpfs')}'")
    load_iceberg(connection)
    connection.execute(duckdb_secret_sql(s3, f"s3://{BUCKET}/"))
    yield connection
    connection.close()


@pytest.fixture
def lh(lakehouse_extension, env) -> duckdb.DuckDBPyConnection:
    """DuckDB with our extension and httpfs from the wheel; no S3 secret of its own (the
    extension creates one from the catalog's properties)."""
    connection = new_connection()
    connection.execute(f"LOAD '{pip_extension_path('httpfs')}'")
    connection.execute(f"LOAD '{lakehouse_extension}'")
    yield connection
    connection.close()


SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "day", DateType(), required=False),
    NestedField(3, "name", StringType(), required=False),
    NestedField(4, "amount", DoubleType(), required=False),
)
SPEC = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="day"))
ARROW = pa.schema([("id", pa.int64()), ("day", pa.date32()), ("name", pa.string()), ("amount", pa.float64())])


def fragmented(pycat, name: str, batches: int = 6, days: int = 3):
    """A table with `batches` appends over `days` partitions: batches x days small files."""
    ident = f"ns.{name}"
    if pycat.table_exists(ident):
        pycat.drop_table(ident)
    table = pycat.create_table(ident, schema=SCHEMA, partition_spec=SPEC)
    next_id = 0
    for b in range(batches):
        rows = []
        for d in range(days):
            for _ in range(50):
                rows.append({"id": next_id, "day": dt.date(2026, 10, 1 + d), "name": f"n{next_id % 7}",
                             "amount": next_id * 0.5})
                next_id += 1
        table.append(pa.Table.from_pylist(rows, schema=ARROW))
    return pycat.load_table(ident)


def rows_pyiceberg(pycat, name: str) -> list[tuple]:
    t = pycat.load_table(f"ns.{name}").scan().to_arrow()
    return sorted(tuple(r.values()) for r in t.to_pylist())


def rows_duckdb(s3con, rest, name: str) -> list[tuple]:
    s3con.execute(f"ATTACH IF NOT EXISTS 'warehouse' AS rc (TYPE iceberg, ENDPOINT '{rest.uri}', "
                  "AUTHORIZATION_TYPE 'none')")
    return sorted(s3con.execute(f"SELECT id, day, name, amount FROM rc.ns.{name}").fetchall())


def bucket_keys(s3, prefix: str) -> set[str]:
    """Keys under `prefix`, read off the server's own storage (not through any S3 client)."""
    root = s3.data_dir / BUCKET
    return {str(p.relative_to(root)) for p in (root / prefix).rglob("*")
            if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts)}


def test_profile_through_the_rest_catalog_matches_pyiceberg(lh, pycat):
    table = fragmented(pycat, "profiled")
    want: dict[str, int] = {}
    for f in table.inspect.files().to_pylist():
        key = f"day={f['partition']['day']}"
        want[key] = want.get(key, 0) + 1
    got = dict(lh.execute(f"SELECT partition, total_files FROM lakehouse_fragmentation('{CATALOG}.ns.profiled')")
               .fetchall())
    assert got == want and sum(got.values()) == 18
    health = lh.execute(f"SELECT snapshots, manifests, metadata_files FROM lakehouse_metadata_health('ns.profiled')"
                        ).fetchone()
    assert health[0] == 6 and health[2] == 7, health  # 6 appends; 7 metadata files (create + 6)


def test_gate_compacts_and_expires_through_the_rest_catalog(lh, pycat, s3con, rest, s3):
    fragmented(pycat, "gated")
    before_py = rows_pyiceberg(pycat, "gated")
    before_duck = rows_duckdb(s3con, rest, "gated")
    assert before_py == before_duck and len(before_py) == 900
    before_keys = bucket_keys(s3, "warehouse/ns/gated")
    rows = lh.execute(f"SELECT partition, verdict, files_before, files_after FROM lakehouse_gate('ns.gated', {SMALL}, "
                      "snapshot_retention_days := 0, retain_last := 1, measure_speedup := true) ORDER BY partition"
                      ).fetchall()
    assert [r[1] for r in rows] == ["compacted"] * 3, rows
    assert all(r[2] == 6 and r[3] == 1 for r in rows), rows
    table = pycat.load_table("ns.gated")
    assert table.current_snapshot().summary.operation.value == "replace"
    assert len(table.snapshots()) == 1, "expired through the catalog down to the compaction snapshot"
    assert rows_pyiceberg(pycat, "gated") == before_py
    assert rows_duckdb(s3con, rest, "gated") == before_py
    after_keys = bucket_keys(s3, "warehouse/ns/gated")
    # The replaced small files and the expired snapshots' manifest lists are gone from the bucket.
    gone = before_keys - after_keys
    assert sum(k.endswith(".parquet") for k in gone) == 18
    assert sum("snap-" in k for k in gone) == 6
    live = {f["file_path"].removeprefix(f"s3://{BUCKET}/") for f in table.inspect.files().to_pylist()}
    assert live <= after_keys


def test_a_concurrent_pyiceberg_commit_is_rebased(lh, pycat, monkeypatch):
    fragmented(pycat, "raced")
    before = rows_pyiceberg(pycat, "raced")
    extra = [{"id": 10_000 + i, "day": dt.date(2026, 10, 9), "name": "late", "amount": 1.0} for i in range(10)]

    def run():
        return lh.execute(f"SELECT partition, verdict FROM lakehouse_compact('ns.raced', {SMALL})").fetchall()

    def concurrent():
        pycat.load_table("ns.raced").append(pa.Table.from_pylist(extra, schema=ARROW))

    outcome = run_paused_before_commit(run, concurrent, lambda: True, monkeypatch)
    assert outcome["paused"], outcome
    assert "error" not in outcome, outcome
    table = pycat.load_table("ns.raced")
    ops = [s.summary.operation.value for s in table.snapshots()]
    assert ops[-2:] == ["append", "replace"], ops
    assert rows_pyiceberg(pycat, "raced") == sorted(before + [tuple(r.values()) for r in extra])


def test_a_table_written_by_duckdb_is_compacted_and_read_back(lh, pycat, s3con, rest):
    if pycat.table_exists("ns.duck"):
        pycat.drop_table("ns.duck")
    s3con.execute(f"ATTACH IF NOT EXISTS 'warehouse' AS rc (TYPE iceberg, ENDPOINT '{rest.uri}', "
                  "AUTHORIZATION_TYPE 'none')")
    s3con.execute("CREATE TABLE rc.ns.duck (id BIGINT, name VARCHAR)")
    for b in range(8):
        s3con.execute(f"INSERT INTO rc.ns.duck SELECT range + {b * 100}, 'x' || range FROM range(100)")
    s3con.execute("DETACH rc")
    before = rows_pyiceberg(pycat, "duck")
    assert len(before) == 800
    got = lh.execute(f"SELECT verdict, files_before, files_after FROM lakehouse_compact('ns.duck', {SMALL})").fetchall()
    assert got == [("compacted", 8, 1)], got
    assert rows_pyiceberg(pycat, "duck") == before
    s3con.execute(f"ATTACH 'warehouse' AS rc (TYPE iceberg, ENDPOINT '{rest.uri}', AUTHORIZATION_TYPE 'none')")
    assert sorted(s3con.execute("SELECT * FROM rc.ns.duck").fetchall()) == before


def test_a_path_table_on_s3_commits_by_conditional_write(lh, pycat, s3con, s3):
    """A Hadoop-style table (vN.metadata.json, no catalog) on S3: the commit creates v2 with
    If-None-Match, the way a local commit creates it exclusively."""
    table = fragmented(pycat, "pathlike")
    metadata = table.metadata_location
    root = metadata.rsplit("/metadata/", 1)[0]
    v1 = f"{root}/metadata/v1.metadata.json"
    s3con.execute(f"COPY (SELECT content FROM read_text('{metadata}')) TO '{v1}' (FORMAT csv, HEADER false, QUOTE '', ESCAPE '')")
    s3con.execute(f"COPY (SELECT 1) TO '{root}/metadata/version-hint.text' (FORMAT csv, HEADER false)")
    before = sorted(s3con.execute(f"SELECT id, day, name, amount FROM iceberg_scan('{v1}')").fetchall())
    got = lh.execute(f"SELECT verdict FROM lakehouse_compact('{v1}', {SMALL})").fetchall()
    assert {r[0] for r in got} == {"compacted"}, got
    v2 = f"{root}/metadata/v2.metadata.json"
    assert sorted(s3con.execute(f"SELECT id, day, name, amount FROM iceberg_scan('{v2}')").fetchall()) == before
    prof = lh.execute(f"SELECT sum(total_files) FROM lakehouse_fragmentation('{v2}')").fetchone()
    assert prof[0] == 3
    hint = s3con.execute(f"SELECT content FROM read_text('{root}/metadata/version-hint.text')").fetchone()[0]
    assert hint.strip() == "2"
    # A second run on the stale v1 base: v2 exists, so its conditional write loses, and on the new
    # head the files it would replace are gone.
    with pytest.raises(duckdb.Error, match="(?i)conflict|no longer live"):
        lh.execute(f"SELECT * FROM lakehouse_compact('{v1}', {SMALL})").fetchall()


def test_a_wrong_secret_names_the_table_not_the_key(lakehouse_extension, clean_catalog_env, pycat, rest, s3, tmp_path):
    fragmented(pycat, "locked", batches=1)
    home = tmp_path / "bad-home"
    write_config(home, rest, s3, secret="wrong-secret-value-42")
    clean_catalog_env.setenv("PYICEBERG_HOME", str(home))
    connection = new_connection()
    connection.execute(f"LOAD '{lakehouse_extension}'")
    with pytest.raises(duckdb.Error) as raised:
        connection.execute("SELECT * FROM lakehouse_fragmentation('ns.locked')").fetchall()
    message = str(raised.value)
    assert "lakehouse_fragmentation" in message and "warehouse/ns/locked" in message, message
    assert "403" in message or "SignatureDoesNotMatch" in message, message
    assert "wrong-secret-value-42" not in message and ACCESS_KEY_ID not in message, message


def test_a_killed_compaction_leaves_only_orphans_that_orphan_removal_deletes(lh, pycat, s3, env, tmp_path,
                                                                            lakehouse_extension):
    fragmented(pycat, "killed")
    before = rows_pyiceberg(pycat, "killed")
    before_keys = bucket_keys(s3, "warehouse/ns/killed")
    script = textwrap.dedent(f"""\
        import duckdb
        con = duckdb.connect(config={{'allow_unsigned_extensions': 'true'}})
        con.execute("LOAD '{pip_extension_path('httpfs')}'")
        con.execute("LOAD '{lakehouse_extension}'")
        con.execute("SELECT * FROM lakehouse_compact('ns.killed', {SMALL})").fetchall()
        """)
    child_env = dict(os.environ, LAKEHOUSE_TEST_PAUSE_BEFORE_COMMIT_MS="60000")
    proc = subprocess.Popen([sys.executable, "-c", script], env=child_env)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            new = bucket_keys(s3, "warehouse/ns/killed") - before_keys
            if sum(k.endswith("-compacted.parquet") for k in new) == 3:
                break
            time.sleep(0.1)
        time.sleep(0.3)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    written = {k for k in bucket_keys(s3, "warehouse/ns/killed") - before_keys}
    assert sum(k.endswith("-compacted.parquet") for k in written) == 3, written
    assert rows_pyiceberg(pycat, "killed") == before
    assert len(pycat.load_table("ns.killed").snapshots()) == 6, "nothing was committed"
    removed = lh.execute("SELECT path, action FROM lakehouse_remove_orphan_files('ns.killed', older_than_days := 0, "
                         "allow_young_orphans := true, dry_run := false)").fetchall()
    assert {p.removeprefix(f"s3://{BUCKET}/") for p, _ in removed} == written, removed
    assert {a for _, a in removed} == {"deleted"}
    assert bucket_keys(s3, "warehouse/ns/killed") == before_keys
    assert rows_pyiceberg(pycat, "killed") == before


def spark_rest_catalog(spark, rest, s3) -> str:
    """Registers the REST catalog in the session's Spark (S3FileIO on the S3 server); returns its name."""
    name = "rc"
    settings = {
        "": "org.apache.iceberg.spark.SparkCatalog",
        ".type": "rest",
        ".uri": rest.uri,
        ".io-impl": "org.apache.iceberg.aws.s3.S3FileIO",
        ".s3.endpoint": s3.endpoint,
        ".s3.path-style-access": "true",
        ".s3.access-key-id": ACCESS_KEY_ID,
        ".s3.secret-access-key": SECRET_ACCESS_KEY,
        ".client.region": "us-east-1",
        # Every statement sees the table as the catalog has it now (we commit behind Spark's back).
        ".cache-enabled": "false",
    }
    for key, value in settings.items():
        spark.conf.set(f"spark.sql.catalog.{name}{key}", value)
    return name


def test_spark_pyiceberg_and_duckdb_read_the_same_rows_after_the_gate(lh, pycat, s3con, rest, s3, spark):
    """Spark (the reference implementation) writes a fragmented table on S3 through the REST
    catalog; after the gate (compaction + expiry through the catalog) Spark, pyiceberg and
    DuckDB's iceberg extension read the same rows."""
    rc = spark_rest_catalog(spark, rest, s3)
    spark.sql(f"DROP TABLE IF EXISTS {rc}.ns.sparked")
    spark.sql(f"CREATE TABLE {rc}.ns.sparked (id BIGINT, day DATE, name STRING, amount DOUBLE) USING iceberg "
              "PARTITIONED BY (day) TBLPROPERTIES ('format-version' = '2')")
    for b in range(5):
        spark.sql(f"INSERT INTO {rc}.ns.sparked SELECT id + {b * 1000}, date_add(DATE'2026-10-01', CAST(id % 2 AS INT)), "
                  f"concat('s', id), id * 0.25 FROM range(200)")
    spark_rows = lambda: sorted(tuple(r) for r in spark.sql(f"SELECT id, day, name, amount FROM {rc}.ns.sparked").collect())  # noqa: E731
    before = spark_rows()
    assert len(before) == 1000 and rows_pyiceberg(pycat, "sparked") == before
    got = lh.execute(f"SELECT partition, verdict, files_before, files_after FROM lakehouse_gate('ns.sparked', {SMALL}, "
                     "snapshot_retention_days := 0, retain_last := 1) ORDER BY partition").fetchall()
    assert [r[1] for r in got] == ["compacted", "compacted"], got
    assert all(r[3] == 1 for r in got), got
    assert spark_rows() == before
    assert rows_pyiceberg(pycat, "sparked") == before
    assert rows_duckdb(s3con, rest, "sparked") == before
    snapshots = spark.sql(f"SELECT operation FROM {rc}.ns.sparked.snapshots").collect()
    assert [r.operation for r in snapshots] == ["replace"], snapshots
    # Spark can keep writing to the compacted table.
    spark.sql(f"INSERT INTO {rc}.ns.sparked VALUES (99999, DATE'2026-10-05', 'after', 1.0)")
    assert rows_pyiceberg(pycat, "sparked") == sorted(before + [(99999, dt.date(2026, 10, 5), "after", 1.0)])


def test_manifests_are_fetched_with_bounded_parallelism_and_slowdowns_are_retried(
        lakehouse_extension, clean_catalog_env, pycat, rest, s3, tmp_path):
    """80 manifests read through a proxy that adds 20 ms per request and answers every 7th request
    503 SlowDown: the profile is the same as read directly, every throttled request was retried,
    and the requests in flight never exceeded the limit (LAKEHOUSE_S3_MAX_IN_FLIGHT, here 4, in a
    fresh process: the limit is read once), while the default limit (32) lets far more overlap."""
    fragmented(pycat, "many", batches=80, days=1)
    direct_home = tmp_path / "direct"
    write_config(direct_home, rest, s3)
    clean_catalog_env.setenv("PYICEBERG_HOME", str(direct_home))
    connection = new_connection()
    connection.execute(f"LOAD '{lakehouse_extension}'")
    query = "SELECT partition, total_files, small_files FROM lakehouse_fragmentation('ns.many')"
    direct = connection.execute(query).fetchall()
    connection.close()
    assert direct == [("day=2026-10-01", 80, 80)], direct
    script = textwrap.dedent(f"""\
        import duckdb, json
        con = duckdb.connect(config={{'allow_unsigned_extensions': 'true'}})
        con.execute("LOAD '{lakehouse_extension}'")
        print(json.dumps([list(r) for r in con.execute("{query}").fetchall()]))
        """)
    observed = {}
    for limit in ("4", None):
        proxy = start_latency_proxy(s3.endpoint, 20, slowdown_every=7)
        try:
            slow_home = tmp_path / f"slow-{limit}"
            write_config(slow_home, rest, proxy)
            child_env = dict(os.environ, PYICEBERG_HOME=str(slow_home))
            child_env.pop("LAKEHOUSE_S3_MAX_IN_FLIGHT", None)
            if limit:
                child_env["LAKEHOUSE_S3_MAX_IN_FLIGHT"] = limit
            out = subprocess.run([sys.executable, "-c", script], env=child_env, capture_output=True, text=True,
                                 timeout=300)
            assert out.returncode == 0, out.stderr[-2000:]
            assert [tuple(r) for r in json.loads(out.stdout.strip().splitlines()[-1])] == direct
            observed[limit] = proxy.stats()
        finally:
            proxy.stop()
    assert all(s["slowdowns"] >= 5 for s in observed.values()), observed
    assert observed["4"]["max_in_flight"] <= 4, observed
    assert observed[None]["max_in_flight"] > 8, observed


def test_a_delta_table_on_s3_is_profiled_compacted_and_vacuumed(lh, s3, s3con):
    """deltalake (delta-rs) writes a fragmented Delta table on S3; we profile it, compact it (the
    commit is a conditional put of the next _delta_log entry) and vacuum it; deltalake and
    DuckDB's delta extension read the same rows, and the replaced files leave the bucket."""
    from deltalake import DeltaTable, write_deltalake

    uri = f"s3://{BUCKET}/delta/events"
    options = {"AWS_ENDPOINT_URL": s3.endpoint, "AWS_ACCESS_KEY_ID": ACCESS_KEY_ID,
               "AWS_SECRET_ACCESS_KEY": SECRET_ACCESS_KEY, "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true",
               "conditional_put": "etag"}
    for b in range(6):
        rows = [{"id": b * 100 + i, "day": f"2026-10-0{1 + i % 3}", "amount": float(i)} for i in range(100)]
        write_deltalake(uri, pa.Table.from_pylist(rows), mode="append", partition_by=["day"], storage_options=options)
    before = sorted(DeltaTable(uri, storage_options=options).to_pyarrow_table().to_pylist(), key=lambda r: r["id"])
    assert len(before) == 600
    before_keys = bucket_keys(s3, "delta/events")
    got = dict(lh.execute(f"SELECT partition, total_files FROM lakehouse_fragmentation('{uri}')").fetchall())
    # Naming its log instead of the table says which path to name (issue 49, item 11).
    with pytest.raises(duckdb.Error, match=f"the transaction log of a Delta Lake table: name the table directory, '{uri}'"):
        lh.execute(f"SELECT * FROM lakehouse_fragmentation('{uri}/_delta_log')")
    assert got == {f"day=2026-10-0{d}": 6 for d in (1, 2, 3)}, got
    compacted = lh.execute(f"SELECT verdict, files_after FROM lakehouse_compact('{uri}', {SMALL})").fetchall()
    assert compacted == [("compacted", 1)] * 3, compacted
    table = DeltaTable(uri, storage_options=options)
    assert table.version() == 6 and table.history(1)[0]["operation"] == "OPTIMIZE"
    assert sorted(table.to_pyarrow_table().to_pylist(), key=lambda r: r["id"]) == before
    s3con.execute(f"LOAD '{pip_extension_path('delta')}'")
    duck = s3con.execute(f"SELECT id, day, amount FROM delta_scan('{uri}') ORDER BY id").fetchall()
    assert duck == [(r["id"], r["day"], r["amount"]) for r in before]
    vacuumed = lh.execute(f"SELECT path, action FROM lakehouse_vacuum('{uri}', retention_hours := 0, "
                          "enforce_retention_duration := false, dry_run := false)").fetchall()
    assert len(vacuumed) == 18 and {a for _, a in vacuumed} == {"deleted"}, vacuumed
    after_keys = bucket_keys(s3, "delta/events")
    gone = before_keys - after_keys
    assert gone == {p.removeprefix(f"s3://{BUCKET}/") for p, _ in vacuumed}
    assert sum(k.endswith(".parquet") and "_delta_log" not in k for k in after_keys) == 3
    assert sorted(DeltaTable(uri, storage_options=options).to_pyarrow_table().to_pylist(),
                  key=lambda r: r["id"]) == before


def test_deletion_vectors_on_s3_are_read_and_purged(lh, s3, s3con):
    """The Delta golden table `dv-partitioned-with-checkpoint` (Spark-written vectors, 'u' paths
    beside the data, a checkpoint) uploaded to S3: every vector is read over S3 by range, the
    files are rewritten with them applied, and DuckDB's delta extension reads the same rows."""
    import pyarrow.fs as pafs

    source = Path(__file__).resolve().parent.parent / "data" / "delta_golden" / "dv-partitioned-with-checkpoint"
    fs = pafs.S3FileSystem(access_key=ACCESS_KEY_ID, secret_key=SECRET_ACCESS_KEY, region="us-east-1",
                           endpoint_override=s3.endpoint, scheme="http")
    prefix = f"{BUCKET}/delta/dv"
    for file in source.rglob("*"):
        if file.is_file() and not file.name.endswith(".crc"):
            with fs.open_output_stream(f"{prefix}/{file.relative_to(source)}") as out:
                out.write(file.read_bytes())
    uri = f"s3://{prefix}"
    s3con.execute(f"LOAD '{pip_extension_path('delta')}'")
    rows = lambda: sorted(s3con.execute(f"SELECT * FROM delta_scan('{uri}')").fetchall(), key=repr)  # noqa: E731
    before = rows()
    assert before
    vectors = lh.execute(f"SELECT sum(delete_files) FROM lakehouse_fragmentation('{uri}')").fetchone()[0]
    assert vectors > 0
    done = lh.execute(f"SELECT verdict, rows_purged FROM lakehouse_compact('{uri}', small_file_threshold_mb := 1, "
                      "target_file_size_mb := 1, delete_ratio_threshold := 0)").fetchall()
    assert "compacted" in {v for v, _ in done} and sum(n for _, n in done) > 0, done
    assert lh.execute(f"SELECT sum(delete_files) FROM lakehouse_fragmentation('{uri}')").fetchone()[0] == 0
    assert rows() == before


def test_a_store_that_ignores_conditional_writes_is_refused(lakehouse_extension, clean_catalog_env, pycat, rest, s3,
                                                            s3con, tmp_path):
    """Through a proxy that answers a failed If-None-Match as a success (what a store without
    conditional writes answers), a commit without a catalog could overwrite another writer's: it
    is refused before anything is written."""
    table = fragmented(pycat, "unconditional", batches=2)
    root = table.metadata_location.rsplit("/metadata/", 1)[0]
    v1 = f"{root}/metadata/v1.metadata.json"
    s3con.execute(f"COPY (SELECT content FROM read_text('{table.metadata_location}')) TO '{v1}' "
                  "(FORMAT csv, HEADER false, QUOTE '', ESCAPE '')")
    proxy = start_latency_proxy(s3.endpoint, 0, ignore_conditional=True)
    try:
        home = tmp_path / "home"
        write_config(home, rest, proxy)
        clean_catalog_env.setenv("PYICEBERG_HOME", str(home))
        connection = new_connection()
        connection.execute(f"LOAD '{pip_extension_path('httpfs')}'")
        connection.execute(f"LOAD '{lakehouse_extension}'")
        with pytest.raises(duckdb.Error, match="does not support conditional writes") as raised:
            connection.execute(f"SELECT * FROM lakehouse_compact('{v1}', {SMALL})").fetchall()
        assert "lakehouse_compact" in str(raised.value)
    finally:
        proxy.stop()
    keys = bucket_keys(s3, root.removeprefix(f"s3://{BUCKET}/"))
    assert not any(k.endswith("v2.metadata.json") or "-compacted.parquet" in k or ".lakehouse-probe" in k
                   for k in keys), keys


def lakehouse_through(lakehouse_extension, monkeypatch, home: Path) -> duckdb.DuckDBPyConnection:
    monkeypatch.setenv("PYICEBERG_HOME", str(home))
    connection = new_connection()
    connection.execute(f"LOAD '{pip_extension_path('httpfs')}'")
    connection.execute(f"LOAD '{lakehouse_extension}'")
    return connection


def through_catalog_proxy(lakehouse_extension, monkeypatch, tmp_path, rest, s3, proxy) -> duckdb.DuckDBPyConnection:
    """Our extension with the catalog reached through `proxy` (S3 direct)."""
    home = tmp_path / "home"
    write_config(home, rest, s3)
    (home / ".pyiceberg.yaml").write_text((home / ".pyiceberg.yaml").read_text().replace(rest.uri, proxy.endpoint))
    return lakehouse_through(lakehouse_extension, monkeypatch, home)


def test_a_commit_the_catalog_took_but_did_not_confirm_counts_as_committed(
        lakehouse_extension, clean_catalog_env, pycat, rest, s3, tmp_path):
    """The catalog commits and the answer is lost (503 after the commit): we reload, find our
    snapshot, and report the compaction as done; the rows are the same and no file the commit
    references was removed."""
    fragmented(pycat, "lost_answer", batches=4)
    before = rows_pyiceberg(pycat, "lost_answer")
    proxy = start_latency_proxy(rest.uri, 0, fail_commits="after")
    try:
        connection = through_catalog_proxy(lakehouse_extension, clean_catalog_env, tmp_path, rest, s3, proxy)
        got = connection.execute(f"SELECT verdict FROM lakehouse_compact('ns.lost_answer', {SMALL})").fetchall()
    finally:
        proxy.stop()
    assert {r[0] for r in got} == {"compacted"}, got
    table = pycat.load_table("ns.lost_answer")
    assert table.current_snapshot().summary.operation.value == "replace"
    assert rows_pyiceberg(pycat, "lost_answer") == before


def test_a_commit_with_an_unknown_outcome_cleans_nothing_up(lakehouse_extension, clean_catalog_env, pycat, rest, s3,
                                                           tmp_path):
    """The catalog answers 503 and never saw the commit: the reload does not show it, so the
    outcome stays unknown — the error says so, and the rewritten files are left in place (a
    commit that landed late would need them) for orphan removal."""
    fragmented(pycat, "no_answer", batches=4)
    before = rows_pyiceberg(pycat, "no_answer")
    before_keys = bucket_keys(s3, "warehouse/ns/no_answer")
    proxy = start_latency_proxy(rest.uri, 0, fail_commits="before")
    try:
        connection = through_catalog_proxy(lakehouse_extension, clean_catalog_env, tmp_path, rest, s3, proxy)
        with pytest.raises(duckdb.Error, match="did not confirm the commit") as raised:
            connection.execute(f"SELECT * FROM lakehouse_compact('ns.no_answer', {SMALL})").fetchall()
        assert "left in place" in str(raised.value)
        with pytest.raises(duckdb.Error, match="did not confirm the expiry"):
            connection.execute("SELECT * FROM lakehouse_expire_snapshots('ns.no_answer', snapshot_retention_days := 0, "
                               "retain_last := 1)").fetchall()
    finally:
        proxy.stop()
    new = bucket_keys(s3, "warehouse/ns/no_answer") - before_keys
    assert sum(k.endswith("-compacted.parquet") for k in new) == 3, new
    assert before_keys <= bucket_keys(s3, "warehouse/ns/no_answer"), "the expiry deleted nothing"
    assert len(pycat.load_table("ns.no_answer").snapshots()) == 4
    assert rows_pyiceberg(pycat, "no_answer") == before


def test_vended_credentials_are_used_before_the_catalogs_properties(lakehouse_extension, clean_catalog_env, s3, tmp_path):
    """A catalog that vends S3 keys with each table: the configuration holds only the endpoint
    and a wrong secret, and the vended keys are the ones used (for the metadata and, through the
    temporary DuckDB secret, for the data)."""
    server = RestCatalogServer()
    server.start(tmp_path / "vending", warehouse=f"s3://{BUCKET}/vended", s3_endpoint=s3.endpoint,
                 access_key=ACCESS_KEY_ID, secret_key=SECRET_ACCESS_KEY, include_credentials=True)
    try:
        catalog = server.pyiceberg_catalog(CATALOG)
        catalog.create_namespace_if_not_exists("ns")
        fragmented(catalog, "vended", batches=3)
        before = rows_pyiceberg(catalog, "vended")
        home = tmp_path / "home"
        write_config(home, server, s3, secret="not-the-secret")
        connection = lakehouse_through(lakehouse_extension, clean_catalog_env, home)
        got = connection.execute(f"SELECT verdict FROM lakehouse_compact('ns.vended', {SMALL})").fetchall()
        assert {r[0] for r in got} == {"compacted"}, got
        assert rows_pyiceberg(catalog, "vended") == before
    finally:
        server.stop()


def test_vacuum_on_s3_keeps_live_files_whose_keys_need_escaping(lh, s3):
    """Partition values with `%`, spaces and brackets: the key delta-rs writes and the path its log
    holds are spelled differently (object_store escapes `%`); vacuum with no retention right
    after the writes must find every live file referenced, and delete nothing."""
    from deltalake import DeltaTable, write_deltalake

    uri = f"s3://{BUCKET}/delta/escaped"
    options = {"AWS_ENDPOINT_URL": s3.endpoint, "AWS_ACCESS_KEY_ID": ACCESS_KEY_ID,
               "AWS_SECRET_ACCESS_KEY": SECRET_ACCESS_KEY, "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true",
               "conditional_put": "etag"}
    values = ["50% off", "a b", "[x]", "plain"]
    for b in range(2):
        rows = [{"id": b * 10 + i, "tag": values[i % len(values)]} for i in range(8)]
        write_deltalake(uri, pa.Table.from_pylist(rows), mode="append", partition_by=["tag"], storage_options=options)
    before = sorted(DeltaTable(uri, storage_options=options).to_pyarrow_table().to_pylist(), key=lambda r: r["id"])
    keys_before = bucket_keys(s3, "delta/escaped")
    vacuumed = lh.execute(f"SELECT path, action FROM lakehouse_vacuum('{uri}', retention_hours := 0, "
                          "enforce_retention_duration := false, dry_run := false)").fetchall()
    assert vacuumed == [], vacuumed
    assert bucket_keys(s3, "delta/escaped") == keys_before
    assert sorted(DeltaTable(uri, storage_options=options).to_pyarrow_table().to_pylist(),
                  key=lambda r: r["id"]) == before


def test_a_v3_table_duckdb_writes_with_nanosecond_timestamps_compacts(lh, pycat, s3con, rest):
    """DuckDB writes a format v3 table through the REST catalog: a `timestamp_ns` column (its
    nanoseconds must survive: DuckDB's TIMESTAMP_NS), eight appends and a delete. After our
    compaction DuckDB reads the same rows, nanoseconds included."""
    if pycat.table_exists("ns.duck_v3"):
        pycat.drop_table("ns.duck_v3")
    s3con.execute(f"ATTACH IF NOT EXISTS 'warehouse' AS rc (TYPE iceberg, ENDPOINT '{rest.uri}', "
                  "AUTHORIZATION_TYPE 'none')")
    s3con.execute("CREATE TABLE rc.ns.duck_v3 (id BIGINT, ts TIMESTAMP_NS) WITH ('format-version' = '3')")
    for b in range(8):
        s3con.execute(f"INSERT INTO rc.ns.duck_v3 SELECT range + {b * 100}, "
                      f"TIMESTAMP_NS '2026-01-01 00:00:00' + to_microseconds(range) + INTERVAL 1 SECOND * {b} "
                      "FROM range(100)")
    s3con.execute("UPDATE rc.ns.duck_v3 SET ts = ts + INTERVAL 1 DAY WHERE id % 9 = 0")
    s3con.execute("DELETE FROM rc.ns.duck_v3 WHERE id % 10 = 3")
    # Nanosecond values DuckDB itself wrote: epoch_ns keeps every digit.
    s3con.execute("UPDATE rc.ns.duck_v3 SET ts = make_timestamp_ns(epoch_ns(ts) + 789) WHERE id % 4 = 0")
    s3con.execute("DETACH rc")
    table = pycat.load_table("ns.duck_v3")
    assert table.metadata.format_version == 3
    s3con.execute(f"ATTACH 'warehouse' AS rc (TYPE iceberg, ENDPOINT '{rest.uri}', AUTHORIZATION_TYPE 'none')")
    before = sorted(s3con.execute("SELECT id, epoch_ns(ts) FROM rc.ns.duck_v3").fetchall())
    s3con.execute("DETACH rc")
    assert len(before) == 720 and any(ns % 1000 == 789 for _, ns in before)
    got = lh.execute(f"SELECT verdict, files_after FROM lakehouse_compact('ns.duck_v3', {SMALL})").fetchall()
    assert [v for v, _ in got] == ["compacted"], got
    s3con.execute(f"ATTACH 'warehouse' AS rc (TYPE iceberg, ENDPOINT '{rest.uri}', AUTHORIZATION_TYPE 'none')")
    assert sorted(s3con.execute("SELECT id, epoch_ns(ts) FROM rc.ns.duck_v3").fetchall()) == before
    s3con.execute("DETACH rc")
    assert pycat.load_table("ns.duck_v3").current_snapshot().summary.operation.value == "replace"


# --------------------------------------------------------------------------- SigV4-signed REST

SIGV4_KEY_ID, SIGV4_SECRET = "AKIDSIGV4TESTKEY", "sigv4-test-secret-0123456789"


@pytest.fixture(scope="module")
def signed(rest):
    """The REST catalog behind a proxy that lets only correctly SigV4-signed requests through
    (botocore recomputes each signature), as Glue's and S3 Tables' Iceberg endpoints do."""
    proxy = SigV4Proxy.start(rest.uri, SIGV4_KEY_ID, SIGV4_SECRET, "eu-west-1", "glue")
    yield proxy
    proxy.stop()


def signed_catalog(env, tmp_path: Path, proxy: SigV4Proxy, s3, secret: str = SIGV4_SECRET, sign: bool = True) -> None:
    home = tmp_path / "signed-home"
    home.mkdir(exist_ok=True)
    (home / ".pyiceberg.yaml").write_text(textwrap.dedent(f"""\
        catalog:
          signed:
            type: rest
            uri: {proxy.uri}
            rest.sigv4-enabled: "{str(sign).lower()}"
            rest.signing-name: glue
            rest.signing-region: eu-west-1
            client.access-key-id: {SIGV4_KEY_ID}
            client.secret-access-key: {secret}
            s3.endpoint: {s3.endpoint}
            s3.access-key-id: {ACCESS_KEY_ID}
            s3.secret-access-key: {SECRET_ACCESS_KEY}
            s3.region: us-east-1
            s3.path-style-access: "true"
        """))
    env.setenv("PYICEBERG_HOME", str(home))


def test_a_sigv4_rest_catalog_gets_every_request_signed(lakehouse_extension, clean_catalog_env, pycat, signed, s3,
                                                        tmp_path):
    fragmented(pycat, "signed")
    before = rows_pyiceberg(pycat, "signed")
    signed_catalog(clean_catalog_env, tmp_path, signed, s3)
    con = new_connection()
    con.execute(f"LOAD '{pip_extension_path('httpfs')}'")
    con.execute(f"LOAD '{lakehouse_extension}'")
    verified = signed.verified
    rows = con.execute(f"SELECT verdict FROM lakehouse_gate('signed.ns.signed', {SMALL}, "
                       "snapshot_retention_days := 0, retain_last := 1)").fetchall()
    con.close()
    assert [r[0] for r in rows] == ["compacted"] * 3, rows
    assert signed.verified - verified >= 4 and signed.refused == []  # config, load, commits, reloads
    assert rows_pyiceberg(pycat, "signed") == before
    assert pycat.load_table("ns.signed").current_snapshot().summary.operation.value == "replace"
    # pyiceberg's own SigV4 signing (botocore's) passes the same proxy and reads the same rows.
    from pyiceberg.catalog.rest import RestCatalog

    theirs = RestCatalog("theirs", uri=signed.uri, **{
        "rest.sigv4-enabled": "true", "rest.signing-name": "glue", "rest.signing-region": "eu-west-1",
        "client.access-key-id": SIGV4_KEY_ID, "client.secret-access-key": SIGV4_SECRET, "client.region": "eu-west-1",
        "s3.endpoint": s3.endpoint, "s3.access-key-id": ACCESS_KEY_ID, "s3.secret-access-key": SECRET_ACCESS_KEY,
        "s3.region": "us-east-1", "s3.path-style-access": "true"})
    assert sorted(tuple(r.values()) for r in theirs.load_table("ns.signed").scan().to_arrow().to_pylist()) == before


def test_a_wrong_or_missing_sigv4_signature_is_refused_naming_the_catalog(lakehouse_extension, clean_catalog_env, pycat,
                                                                         signed, s3, tmp_path):
    fragmented(pycat, "unsigned", batches=2)
    con = new_connection()
    con.execute(f"LOAD '{lakehouse_extension}'")
    wrong = "not-the-sigv4-secret-9876543210"
    signed_catalog(clean_catalog_env, tmp_path, signed, s3, secret=wrong)
    with pytest.raises(duckdb.Error) as refused:
        con.execute("SELECT * FROM lakehouse_fragmentation('signed.ns.unsigned')").fetchall()
    message = str(refused.value)
    assert "REST catalog 'signed'" in message and "403" in message and "signature does not match" in message, message
    assert wrong not in message and SIGV4_SECRET not in message
    signed_catalog(clean_catalog_env, tmp_path, signed, s3, sign=False)
    with pytest.raises(duckdb.Error, match="no SigV4 signature"):
        con.execute("SELECT * FROM lakehouse_fragmentation('signed.ns.unsigned')").fetchall()
    con.close()
