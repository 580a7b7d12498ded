"""The Spark executor: lakehouse_compact / lakehouse_gate plan here and hand degraded partitions
to Apache Spark over Spark Connect (``CALL sc.system.rewrite_data_files(…, where => …)``).

A real Spark Connect server (spark_connect.py: PySpark 4.0.1 + Iceberg 1.10.1, loopback) and the
extension share one catalog: Iceberg's JDBC catalog on a sqlite file, which the extension opens as
its SQL catalog ``sc``. Apache Spark (the classic session of spark.py, same catalog) writes the
tables, many small files per partition. Checks, all through engines we did not write:

- the partitions sent to Spark go in one ``CALL`` (their predicates OR-ed), whose one snapshot is
  Spark's (its summary says ``engine-name = spark``) and touches exactly the planned partitions
  (Spark's own ``entries`` metadata table);
- the partition predicates select their partition for every transform (identity on string with
  a quote and a backslash, long, boolean, date, decimal, timestamp_ntz; day, hour, month, year;
  bucket; truncate) — a predicate that selected nothing or too much would show as a partition
  left with its small files, or as a Spark snapshot spanning partitions;
- the same rows before and after through Spark, pyiceberg and DuckDB's iceberg extension;
- ``auto`` splits by the planned rewrite's size; a dry run routes and explains but changes
  nothing; Spark down: a clear error naming the execution, the failure alert, the table as it was.
"""

from __future__ import annotations

import collections
import json

import pytest

import conftest as c
import spark as sp
import spark_connect as scn
from test_compact_iceberg import duckdb_rows, pyiceberg_rows
from test_gate import FakeSlack, gate, sql_value

MIB = 1024 * 1024


@pytest.fixture
def slack():
    server = FakeSlack()
    yield server
    server.close()


@pytest.fixture(scope="module")
def lab(spark, spark_connect):
    """The classic Spark session with the Connect server's catalog attached."""
    scn.attach_catalog(spark, spark_connect)
    return Lab(spark, spark_connect)


class Lab:
    def __init__(self, spark, server: scn.SparkConnectServer) -> None:
        self.spark = spark
        self.server = server
        self.count = 0

    def sql(self, statement: str) -> list:
        return self.spark.sql(statement).collect()

    def new_table(self, columns: str, partitioned_by: str, inserts: list[str], files_per_insert: int = 2) -> str:
        """``ns.<fresh name>`` written by Spark: one INSERT (one snapshot) per select, each spread
        over ``files_per_insert`` tasks so every partition gets small files."""
        self.count += 1
        name = f"t{self.count}"
        self.sql(
            f"CREATE TABLE {self.server.ident(name)} ({columns}) USING iceberg PARTITIONED BY ({partitioned_by}) "
            "TBLPROPERTIES ('format-version'='2', 'write.distribution-mode'='none')"
        )
        for select in inserts:
            self.sql(
                f"INSERT INTO {self.server.ident(name)} SELECT /*+ REPARTITION({files_per_insert}) */ * FROM ({select})"
            )
        return f"{sp.NAMESPACE}.{name}"

    def rows(self, table: str) -> list[tuple]:
        return sorted((sp.plain(r) for r in self.spark.table(f"{self.server.catalog}.{table}").collect()), key=repr)

    def snapshots(self, table: str) -> dict[int, dict]:
        return {
            r["snapshot_id"]: {"operation": r["operation"], "summary": dict(r["summary"] or {})}
            for r in self.spark.sql(f"SELECT * FROM {self.server.catalog}.{table}.snapshots").collect()
        }

    def touched(self, table: str, snapshot_id: int) -> set[str]:
        """Partitions whose files Spark's ``entries`` table says the snapshot added or deleted."""
        rows = self.spark.sql(
            f"SELECT data_file.partition AS p FROM {self.server.catalog}.{table}.all_entries "
            f"WHERE snapshot_id = {snapshot_id} AND status IN (1, 2)"
        ).collect()
        return {repr(sp.plain(r["p"])) for r in rows}

    def files_per_partition(self, table: str) -> dict[str, int]:
        rows = self.spark.sql(f"SELECT partition FROM {self.server.catalog}.{table}.files WHERE content = 0").collect()
        return dict(collections.Counter(repr(sp.plain(r["partition"])) for r in rows))

    def pyiceberg(self):
        return scn.sql_catalog(self.server.sqlite_path, self.server.warehouse)

    def params(self, **extra) -> dict:
        return dict(catalog="sc", catalog_uri=self.server.sqlite_uri, spark_remote=self.server.url) | extra


def run(con, function: str, table: str, **params) -> list[dict]:
    params = {k: v for k, v in params.items() if v is not None}
    args = "".join(f", {k} := {sql_value(v)}" for k, v in params.items())
    cur = con.execute(f"SELECT * FROM {function}('{table}'{args})")
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r)) for r in cur.fetchall()]


def all_rows(lab: Lab, iceberg_con, table: str) -> tuple:
    py = lab.pyiceberg().load_table(table)
    return lab.rows(table), pyiceberg_rows(py), duckdb_rows(iceberg_con, py.metadata_location)


def check_spark_rewrites(lab: Lab, table: str, rows: list[dict], before_snapshots: dict) -> None:
    """Every row compacted by Spark names the one Spark `replace` snapshot of the run (one CALL for
    all of them), which touched exactly their partitions, no other."""
    after = lab.snapshots(table)
    spark_rows = [r for r in rows if r["executor"] == "spark" and r["snapshot_id"] is not None]
    ids = {r["snapshot_id"] for r in spark_rows}
    assert len(ids) <= 1, ids
    for sid in ids:
        assert sid not in before_snapshots and sid in after, sid
        assert after[sid]["operation"] == "replace"
        assert after[sid]["summary"].get("engine-name") == "spark", after[sid]
        assert len(lab.touched(table, sid)) == len(spark_rows), ([r["partition"] for r in spark_rows], lab.touched(table, sid))
    new_spark = [sid for sid in after if sid not in before_snapshots and after[sid]["summary"].get("engine-name") == "spark"]
    assert len(new_spark) == len(ids), new_spark


def test_executor_spark_rewrites_exactly_the_degraded_partitions(con, iceberg_con, lab):
    table = lab.new_table(
        "id bigint, region string, ts timestamp, payload string",
        "region, days(ts)",
        [
            # Two regions over two days, one with a quote and a backslash in its value.
            "SELECT id, CASE WHEN id % 2 = 0 THEN 'eu' ELSE 'o\\'r\\\\x' END AS region, "
            "TIMESTAMP '2026-11-01 10:00:00' + make_interval(0, 0, 0, CAST(id % 4 >= 2 AS INT), 0, 0, 0) AS ts, "
            "repeat('x', 64) AS payload FROM range(0, 400)",
            "SELECT id, CASE WHEN id % 2 = 0 THEN 'eu' ELSE 'o\\'r\\\\x' END, "
            "TIMESTAMP '2026-11-01 10:00:00' + make_interval(0, 0, 0, CAST(id % 4 >= 2 AS INT), 0, 0, 0), "
            "repeat('y', 64) FROM range(400, 800)",
        ],
    )
    # One partition with a single file: nothing to merge (healthy, below min_input_files), never sent.
    lab.sql(
        f"INSERT INTO sc.{table} SELECT /*+ REPARTITION(1) */ 9999, 'solo', TIMESTAMP '2026-11-05 00:00:00', 'z'"
    )
    before = all_rows(lab, iceberg_con, table)
    before_files = lab.files_per_partition(table)
    before_snapshots = lab.snapshots(table)
    assert len(before_files) == 5 and all(n >= 2 for p, n in before_files.items() if "solo" not in p)

    params = lab.params(executor="spark", small_file_threshold_mb=1.0, target_file_size_mb=8.0)
    dry = run(con, "lakehouse_compact", table, dry_run=True, **params)
    planned = [r for r in dry if r["verdict"] == "would compact"]
    assert len(planned) == 4 and all(r["executor"] == "spark" for r in planned)
    assert all("executor := 'spark'" in r["executor_reason"] and "where" in r["executor_reason"] for r in planned)
    assert any("o\\'r\\\\x" in r["executor_reason"] for r in planned), [r["executor_reason"] for r in planned]
    assert lab.snapshots(table) == before_snapshots  # a dry run sends nothing

    rows = run(con, "lakehouse_compact", table, **params)
    by_partition = {r["partition"]: r for r in rows}
    compacted = [r for r in rows if r["verdict"] == "compacted"]
    assert len(compacted) == 4, rows
    assert all(r["executor"] == "spark" and r["snapshot_id"] is not None for r in compacted)
    assert all(r["files_after"] == 1 and r["output_files"] == 1 and r["bytes_rewritten"] > 0 for r in compacted)
    solo = by_partition["region=solo/ts_day=2026-11-05"]
    assert (solo["verdict"], solo["executor"]) == ("healthy", None), solo
    check_spark_rewrites(lab, table, rows, before_snapshots)
    after_files = lab.files_per_partition(table)
    assert all(n == 1 for n in after_files.values()) and after_files.keys() == before_files.keys()
    assert all_rows(lab, iceberg_con, table) == before


@pytest.mark.parametrize(
    "columns, partitioned_by, select",
    [
        (
            "id bigint, code string, ts timestamp, v int",
            "bucket(3, id), truncate(2, code), hours(ts)",
            "SELECT id % 6 AS id, concat(CASE WHEN id % 3 = 0 THEN 'ab' ELSE 'cd' END, CAST(id AS STRING)) AS code, "
            "TIMESTAMP '2026-11-01 10:15:00' + make_interval(0, 0, 0, 0, CAST(id % 2 AS INT), 0, 0) AS ts, "
            "CAST(id AS INT) AS v FROM range(0, 48)",
        ),
        (
            "n timestamp_ntz, d date, flag boolean, amount decimal(8,2), v bigint",
            "months(n), years(d), flag, amount",
            "SELECT TIMESTAMP_NTZ '2026-01-31 23:00:00' + make_interval(0, CAST(id % 2 AS INT), 0, 0, 0, 0, 0) AS n, "
            "DATE '1969-12-31' + CAST(id % 2 AS INT) AS d, id % 2 = 0 AS flag, CAST(-12.5 AS DECIMAL(8,2)) AS amount, "
            "id AS v FROM range(0, 32)",
        ),
        (
            "big bigint, day date, v bigint",
            "big, day",
            "SELECT 20000000001 + id % 2 AS big, DATE '2026-11-02' AS day, id AS v FROM range(0, 32)",
        ),
    ],
    ids=["bucket-truncate-hour", "month-year-boolean-decimal", "long-date"],
)
def test_every_transforms_predicate_selects_its_partition_alone(con, iceberg_con, lab, columns, partitioned_by, select):
    table = lab.new_table(columns, partitioned_by, [select, select])
    before = all_rows(lab, iceberg_con, table)
    before_files = lab.files_per_partition(table)
    before_snapshots = lab.snapshots(table)
    rows = run(con, "lakehouse_compact", table, **lab.params(executor="spark", small_file_threshold_mb=1.0, target_file_size_mb=8.0))
    compacted = [r for r in rows if r["verdict"] == "compacted"]
    assert compacted and all(r["executor"] == "spark" for r in compacted)
    check_spark_rewrites(lab, table, rows, before_snapshots)
    after_files = lab.files_per_partition(table)
    # Every partition that had several files now has one: each predicate found its files.
    assert after_files.keys() == before_files.keys()
    assert all(after_files[p] == 1 for p, n in before_files.items() if n >= 2), (before_files, after_files)
    assert len(compacted) == sum(1 for n in before_files.values() if n >= 2)
    assert all_rows(lab, iceberg_con, table) == before


def test_auto_sends_only_partitions_larger_than_the_local_limit(con, iceberg_con, lab):
    table = lab.new_table(
        "id bigint, region string, payload string",
        "region",
        [
            "SELECT id, CASE WHEN id % 16 < 15 THEN 'big' ELSE 'small' END, sha2(CAST(id AS STRING), 256) FROM range(0, 3200)",
            "SELECT id, CASE WHEN id % 16 < 15 THEN 'big' ELSE 'small' END, sha2(CAST(id AS STRING), 256) FROM range(3200, 6400)",
        ],
    )
    before = all_rows(lab, iceberg_con, table)
    before_snapshots = lab.snapshots(table)
    params = lab.params(executor="auto", small_file_threshold_mb=1.0, target_file_size_mb=8.0)
    dry = {r["partition"]: r for r in run(con, "lakehouse_compact", table, dry_run=True, **params)}
    big, small = dry["region=big"]["bytes_rewritten"], dry["region=small"]["bytes_rewritten"]
    assert big > 4 * small > 0
    limit_mb = (big + small) / 2 / MIB
    params["local_max_partition_mb"] = limit_mb
    dry = {r["partition"]: r for r in run(con, "lakehouse_compact", table, dry_run=True, **params)}
    assert dry["region=big"]["executor"] == "spark" and "> local_max_partition_mb" in dry["region=big"]["executor_reason"]
    assert dry["region=small"]["executor"] == "local" and "<= local_max_partition_mb" in dry["region=small"]["executor_reason"]

    rows = {r["partition"]: r for r in run(con, "lakehouse_compact", table, **params)}
    assert rows["region=big"]["executor"] == "spark" and rows["region=small"]["executor"] == "local"
    assert rows["region=big"]["snapshot_id"] != rows["region=small"]["snapshot_id"]
    after = lab.snapshots(table)
    ours = after[rows["region=small"]["snapshot_id"]]
    assert ours["operation"] == "replace" and ours["summary"].get("engine-name") != "spark"
    check_spark_rewrites(lab, table, list(rows.values()), before_snapshots)
    assert list(lab.files_per_partition(table).values()) == [1, 1]
    assert all_rows(lab, iceberg_con, table) == before


def test_gate_with_spark_reports_sparks_snapshot_in_the_scorecard(con, iceberg_con, lab, slack):
    table = lab.new_table(
        "id bigint, region string",
        "region",
        ["SELECT id, CASE WHEN id % 2 = 0 THEN 'a' ELSE 'b' END FROM range(0, 200)"] * 3,
    )
    before = all_rows(lab, iceberg_con, table)
    before_snapshots = lab.snapshots(table)
    rows = gate(con, table, executor="spark", small_file_threshold_mb=1.0, target_file_size_mb=8.0,
                slack_webhook_url=slack.url, **lab.params())
    assert {r["verdict"] for r in rows} == {"compacted"} and {r["executor"] for r in rows} == {"spark"}
    first = rows[0]
    assert first["status"] == "maintained" and first["partitions_compacted"] == 2
    assert first["compaction_snapshot_id"] in lab.snapshots(table)
    assert lab.snapshots(table)[first["compaction_snapshot_id"]]["summary"].get("engine-name") == "spark"
    assert all(r["files_after"] == 1 and "Spark rewrote" in r["action"] for r in rows)
    assert all(r["small_files_after"] == 1 for r in rows)  # from our re-profile: the new file is still small
    assert set(lab.snapshots(table)) > set(before_snapshots)
    assert all_rows(lab, iceberg_con, table) == before
    (req,) = slack.requests
    assert first["execution_id"] in json.dumps(req["body"]) and "Partitions Compacted:* 2 of 2" in req["body"]["text"]


def test_spark_down_raises_alerts_and_leaves_the_table_as_it_was(con, iceberg_con, lab, slack):
    table = lab.new_table("id bigint, region string", "region", ["SELECT id, 'r' || (id % 2) FROM range(0, 100)"] * 3)
    before = all_rows(lab, iceberg_con, table)
    location = lab.pyiceberg().load_table(table).metadata_location
    down = scn.unused_url()
    params = lab.params(executor="spark", small_file_threshold_mb=1.0, target_file_size_mb=8.0,
                        snapshot_retention_days=0.0, retain_last=1)
    params["spark_remote"] = down
    with pytest.raises(Exception) as err:
        gate(con, table, slack_webhook_url=slack.url, **params)
    message = str(err.value)
    port = down.rsplit(":", 1)[1]
    assert f"Spark Connect at 127.0.0.1:{port} is unreachable" in message, message
    assert "nothing was committed" in message and "nothing was expired" in message and "[execution " in message
    (req,) = slack.requests
    execution = message.split("[execution ")[1].rstrip("]").split("]")[0]
    assert execution in json.dumps(req["body"])
    # Nothing changed: same metadata file (no compaction, no expiry), same rows.
    assert lab.pyiceberg().load_table(table).metadata_location == location
    assert all_rows(lab, iceberg_con, table) == before

    with pytest.raises(Exception) as err:
        run(con, "lakehouse_compact", table, **params | {"snapshot_retention_days": None, "retain_last": None})
    assert "unreachable" in str(err.value)


def test_bad_executor_input_is_refused_by_name(con, lab, monkeypatch):
    table = lab.new_table("id bigint, region string", "region", ["SELECT id, 'x' FROM range(0, 10)"])
    cases = [
        (dict(executor="yarn"), "executor must be 'local', 'spark' or 'auto', got 'yarn'"),
        (dict(executor="spark", spark_remote="http://h:1"), "spark_remote must start with sc://"),
        (dict(executor="spark", spark_remote="sc://h/;token=S3CRET"), "TLS"),
        (dict(executor="auto", spark_remote="sc://h:1", local_max_partition_mb=-1), "local_max_partition_mb must be a positive"),
        (dict(executor="spark", spark_remote=None), "needs spark_remote"),
    ]
    monkeypatch.delenv("SPARK_REMOTE", raising=False)
    for extra, expected in cases:
        params = lab.params(**extra)
        for function in ("lakehouse_compact", "lakehouse_gate"):
            with pytest.raises(Exception) as err:
                run(con, function, table, **params)
            assert f"{function}: " in str(err.value) and expected in str(err.value), str(err.value)
            assert "S3CRET" not in str(err.value)
    # A table named by path cannot be found by Spark.
    path = lab.pyiceberg().load_table(table).metadata_location
    with pytest.raises(Exception) as err:
        run(con, "lakehouse_compact", path, executor="spark", spark_remote="sc://127.0.0.1:1", small_file_threshold_mb=1.0)
    assert "named through its catalog" in str(err.value)


def test_a_spark_commit_beyond_the_planned_partition_is_reported_and_nothing_is_expired(
    con, iceberg_con, lab, slack, monkeypatch
):
    # Test builds only: the predicate Spark gets is replaced by one that selects every partition,
    # as a predicate bug would; Spark's one commit then rewrites both partitions, of which the gate
    # planned one (``partitions``).
    table = lab.new_table("id bigint, region string", "region", ["SELECT id, 'r' || (id % 2) FROM range(0, 100)"] * 3)
    before = all_rows(lab, iceberg_con, table)
    snapshots_before = lab.snapshots(table)
    monkeypatch.setenv("LAKEHOUSE_TEST_SPARK_WHERE", "id >= 0")
    with pytest.raises(Exception) as err:
        gate(con, table, slack_webhook_url=slack.url, **lab.params(
            executor="spark", small_file_threshold_mb=1.0, target_file_size_mb=8.0, snapshot_retention_days=0.0,
            retain_last=1, partitions=["region=r0"]))
    message = str(err.value)
    assert "also rewrote 1 other partition (region=r1)" in message and "which the gate did not plan" in message, message
    assert "Spark committed snapshot" in message and "nothing was expired" in message, message
    (req,) = slack.requests
    assert message.split("[execution ")[1].split("]")[0] in json.dumps(req["body"])
    # Spark's commit stands (its rows are the same), and our expiry did not run: every snapshot
    # from before is still there, despite snapshot_retention_days := 0.
    after = lab.snapshots(table)
    assert set(snapshots_before) < set(after)
    assert all_rows(lab, iceberg_con, table) == before


def test_an_evolved_spec_stays_local_under_auto_and_is_refused_under_spark(con, iceberg_con, lab):
    # Spark's where cannot keep a rewrite to one spec: a range on the new field also picks the old
    # spec's files whose bounds overlap it.
    table = lab.new_table("id bigint, region string, d date", "region",
                          ["SELECT id, 'a', DATE '2026-11-01' + CAST(id % 2 AS INT) FROM range(0, 50)"] * 2)
    lab.sql(f"ALTER TABLE sc.{table} ADD PARTITION FIELD days(d)")
    for _ in range(2):
        lab.sql(f"INSERT INTO sc.{table} SELECT /*+ REPARTITION(2) */ id, 'a', DATE '2026-11-01' + CAST(id % 2 AS INT) "
                "FROM range(100, 150)")
    before = all_rows(lab, iceberg_con, table)
    params = lab.params(small_file_threshold_mb=1.0, target_file_size_mb=8.0)
    with pytest.raises(Exception) as err:
        run(con, "lakehouse_compact", table, executor="spark", **params)
    assert "cannot be sent to Spark: the table has live data files in 2 partition specs" in str(err.value)
    rows = run(con, "lakehouse_compact", table, executor="auto", local_max_partition_mb=0.0001, **params)
    compacted = [r for r in rows if r["verdict"] == "compacted"]
    assert compacted and all(r["executor"] == "local" for r in compacted)
    assert all("Spark cannot select this partition alone" in r["executor_reason"] for r in compacted)
    assert all_rows(lab, iceberg_con, table) == before


@pytest.mark.parametrize("sort_order", ["x DESC NULLS LAST, id", "zorder(x, id)"])
def test_spark_rewrites_in_the_layout_asked_for(con, iceberg_con, lab, sort_order):
    """The layout travels with the CALL (``strategy => 'sort', sort_order => …`` in Spark's
    spelling, back-quoted names): Spark accepts it, the rows stay the same, and with a sort order
    Spark's new files (read by Spark in file order) follow it."""
    table = lab.new_table(
        "id bigint, x int, d date",
        "d",
        [
            "SELECT id, CASE WHEN id % 13 = 0 THEN NULL ELSE CAST(pmod(hash(id), 1000) AS INT) END AS x, "
            "DATE '2026-11-01' + CAST(id % 2 AS INT) AS d FROM range(0, 600)",
            "SELECT id, CAST(pmod(hash(id), 1000) AS INT), DATE '2026-11-01' + CAST(id % 2 AS INT) FROM range(600, 1200)",
        ],
    )
    before = all_rows(lab, iceberg_con, table)
    before_snapshots = lab.snapshots(table)
    params = lab.params(executor="spark", small_file_threshold_mb=1.0, target_file_size_mb=8.0, sort_order=sort_order)
    dry = run(con, "lakehouse_compact", table, dry_run=True, **params)
    assert [r["executor"] for r in dry if r["verdict"] == "would compact"] == ["spark", "spark"], dry
    rows = run(con, "lakehouse_compact", table, **params)
    compacted = [r for r in rows if r["verdict"] == "compacted"]
    assert len(compacted) == 2 and all(r["executor"] == "spark" for r in compacted), rows
    check_spark_rewrites(lab, table, rows, before_snapshots)
    assert all_rows(lab, iceberg_con, table) == before
    if not sort_order.startswith("zorder"):
        files = [r["file_path"] for r in lab.spark.sql(f"SELECT file_path FROM {lab.server.catalog}.{table}.files").collect()]
        for f in files:
            got = lab.spark.sql(
                f"SELECT x, id FROM {lab.server.catalog}.{table} WHERE _file = '{f}' ORDER BY _pos"
            ).collect()
            keys = [(r.x is None, -(r.x or 0), r.id) for r in got]
            assert keys == sorted(keys), f
