"""Data safety, round 4 (issue 47, items 1-5): table history, row lineage and delete precedence,
checked against engines we did not write — Apache Spark 4.0.1 with Iceberg 1.10.1 (the reference
implementation) and Delta Lake 4.0.0, and deltalake.

Each test fails on the code before the fix:

1. **A rollback during compaction is not undone.** Spark rolls `main` back
   (`rollback_to_snapshot`, `set_current_snapshot`) to the snapshot before a position delete
   while our compaction — which read the table after that delete and applied it — waits to
   commit. Our commit must not land on top of the rolled-back head with the delete baked into
   its new file: Spark then reads the rolled-back rows. Delta: a `RESTORE` between our read and
   our commit aborts the commit.
2. **On v3, a deletion vector does not hide older Avro/ORC position deletes.** A v2 table whose
   first DELETE wrote Avro (or ORC) position deletes and whose second wrote Parquet ones, on the
   same data files, upgraded to v3: after `lakehouse_rewrite_position_deletes` Spark (which, per
   the spec, reads only a data file's vector once it has one) reads the rows it read before.
3. **First-row-id inheritance skips DELETED entries.** Two partitions of an upgraded table are
   compacted one after the other; the first commit leaves manifests of DELETED and EXISTING
   entries with a list-level `first_row_id`. Every row keeps its `_row_id` and
   `_last_updated_sequence_number`, and no two rows share a `_row_id`.
4. **Partial progress keeps the row ids the first v3 commit assigned.** On a table upgraded to
   v3 (manifests without `first_row_id`), the later batches of a partial-progress compaction
   (and of the gate) keep the ids the first batch's commit gave their rows.
5. **Equality deletes on doubles compare as Java does.** Java's `DeleteFilter` puts the deleted
   values in a `StructLikeSet` (`StructLikeWrapper`: `Comparators.forType` — for doubles
   `Comparator.naturalOrder()`, i.e. `Double.compareTo` — and `JavaHash`, i.e.
   `Double.hashCode`): -0.0 and 0.0 are different values, NaN equals NaN. Compaction and the
   equality → position conversion must delete exactly the rows Spark does.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

import conftest as c
import delta_tables as d
from test_delta import call
from test_iceberg_v3 import compact, latest_metadata
from test_rewrite_position_deletes import rewrite

NS = "hc.ns"
# How long our commit is held back while Spark changes the table (a Spark procedure or DELETE on a
# warm session takes about a second; the rest is margin for a loaded 2-core machine).
SPARK_PAUSE_MS = 10_000


# --------------------------------------------------------------------------- shared helpers


def new_spark_table(spark, warehouse: Path, name: str, columns: str, properties: dict[str, str],
                    partitioned_by: str | None = "p") -> tuple[str, Path]:
    """A fresh Iceberg table ``hc.ns.<name>`` in Spark's Hadoop catalog; its identifier and directory."""
    ident = f"{NS}.{name}"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {NS}")
    spark.sql(f"DROP TABLE IF EXISTS {ident}")
    props = ", ".join(f"'{k}'='{v}'" for k, v in properties.items())
    partitioning = f"PARTITIONED BY ({partitioned_by})" if partitioned_by else ""
    spark.sql(f"CREATE TABLE {ident} ({columns}) USING iceberg {partitioning} TBLPROPERTIES ({props})")
    return ident, warehouse / "ns" / name


def metadata_json(table: Path) -> dict[str, Any]:
    return json.loads(latest_metadata(table).read_text())


def current_snapshot_id(table: Path) -> int:
    return metadata_json(table)["current-snapshot-id"]


def replace_snapshots(table: Path) -> list[int]:
    """Ids of the table's `replace` snapshots (our commits), oldest first."""
    snapshots = sorted(metadata_json(table)["snapshots"], key=lambda s: s["sequence-number"])
    return [s["snapshot-id"] for s in snapshots if s["summary"]["operation"] == "replace"]


def spark_rows(spark, ident: str, snapshot_id: int | None = None) -> list[str]:
    """Every row as Spark reads it (JSON, sorted), at the current or the given snapshot."""
    travel = f" VERSION AS OF {snapshot_id}" if snapshot_id is not None else ""
    return sorted(r[0] for r in spark.sql(f"SELECT to_json(struct(*)) FROM {ident}{travel}").collect())


def lineage_by_key(spark, ident: str, snapshot_id: int | None = None) -> dict[int, tuple[Any, Any]]:
    """Row key (`id`) -> (`_row_id`, `_last_updated_sequence_number`) as Spark reads them."""
    travel = f" VERSION AS OF {snapshot_id}" if snapshot_id is not None else ""
    frame = spark.sql(f"SELECT id, _row_id, _last_updated_sequence_number FROM {ident}{travel}")
    out: dict[int, tuple[Any, Any]] = {}
    for key, row_id, seq in frame.collect():
        assert key not in out, f"the scenario's keys are unique: {key}"
        out[key] = (row_id, seq)
    return out


def assert_unique_row_ids(lineage: dict[int, tuple[Any, Any]]) -> None:
    ids = [row_id for row_id, _ in lineage.values()]
    assert None not in ids, "every row has a _row_id"
    duplicated = sorted({i for i in ids if ids.count(i) > 1})
    assert not duplicated, f"{len(ids)} rows, {len(set(ids))} distinct _row_ids; shared: {duplicated[:10]}"


def compacted_files(table: Path) -> set[Path]:
    return set(table.rglob("*-compacted.parquet"))


def brief(outcome: dict) -> dict:
    """A run's outcome, each partition's row cut to what it did (for assertion messages)."""
    keep = ("partition", "verdict", "commit", "snapshot_id")
    rows = outcome.get("rows")
    rows = [{k: r.get(k) for k in keep} for r in rows.values()] if isinstance(rows, dict) else \
        [{k: r.get(k) for k in keep} for r in rows or []]
    return {**outcome, "rows": rows}


# --------------------------------------------------------------------------- 1. rollback / restore


def rollback_table(spark, warehouse: Path, name: str) -> tuple[str, Path, int]:
    """A v2 merge-on-read table, two partitions of four small files each, then a Spark DELETE
    (position delete files). Returns the snapshot id before the DELETE."""
    ident, table = new_spark_table(
        spark, warehouse, name, "id bigint, p string, v string",
        {"format-version": "2", "write.delete.mode": "merge-on-read"})
    for i in range(4):
        spark.sql(f"INSERT INTO {ident} SELECT id, concat('p', id % 2), concat('v', id) FROM range({i * 20}, {i * 20 + 20})")
    before_delete = current_snapshot_id(table)
    spark.sql(f"DELETE FROM {ident} WHERE id % 3 = 0")
    formats = {r[0] for r in spark.sql(f"SELECT file_format FROM {ident}.delete_files").collect()}
    assert formats == {"PARQUET"}, f"the DELETE left position delete files: {formats}"
    return ident, table, before_delete


@pytest.mark.parametrize(
    "procedure, partial_progress",
    [("rollback_to_snapshot", False), ("set_current_snapshot", False), ("rollback_to_snapshot", True)],
)
def test_a_rollback_while_we_compact_is_not_undone(con, spark, spark_warehouse, monkeypatch, procedure,
                                                    partial_progress):
    """Issue 47 item 1. Our compaction reads the table after a Spark DELETE and rewrites its
    files with the delete applied; while our commit is held back, Spark moves `main` back to the
    snapshot before the DELETE (`CALL hc.system.rollback_to_snapshot` / `set_current_snapshot`).
    The snapshot we read is then no ancestor of the head (Java refuses such a commit:
    `MergingSnapshotProducer.validationHistory`), so our commit must not land there: Spark reads
    exactly the rolled-back rows, the deleted ones back. Without partial progress the call fails
    as a commit conflict and nothing is committed after the rollback; with partial progress the
    partitions are planned again on the rolled-back head (no delete there) and committed."""
    name = f"rollback_{procedure}_{'pp' if partial_progress else 'once'}"
    ident, table, before_delete = rollback_table(spark, spark_warehouse, name)
    rolled_back = spark_rows(spark, ident, before_delete)
    assert len(rolled_back) == 80 and len(spark_rows(spark, ident)) == 80 - 27
    existing = compacted_files(table)
    during: dict[str, Any] = {}

    def run():
        # With partial progress, one batch (max_commits 1): one held-back commit, then the retry.
        options = {"partial_progress": True, "max_commits": 1} if partial_progress else {}
        return compact(con, table, **options)

    def roll_back():
        spark.sql(f"CALL hc.system.{procedure}('ns.{name}', {before_delete})")
        # Our commit has not landed yet (else the rollback would have undone it, proving nothing).
        during["head"] = current_snapshot_id(table)
        during["ours_before_rollback"] = replace_snapshots(table)

    outcome = c.run_paused_before_commit(run, roll_back, lambda: bool(compacted_files(table) - existing),
                                         monkeypatch, pause_ms=SPARK_PAUSE_MS)
    assert outcome["paused"], outcome
    assert during == {"head": before_delete, "ours_before_rollback": []}, during

    assert spark_rows(spark, ident) == rolled_back, (
        f"Spark must read the rolled-back rows (the 27 deleted ones back); outcome: {brief(outcome)}")
    if partial_progress:
        assert "rows" in outcome, outcome
        commits = {r["partition"]: r["commit"] for r in outcome["rows"] if r["verdict"] == "compacted"}
        assert commits == {"p=p0": "retried 1×, committed", "p=p1": "retried 1×, committed"}, outcome
        head = metadata_json(table)
        chain, snapshot = set(), head["current-snapshot-id"]
        parents = {s["snapshot-id"]: s.get("parent-snapshot-id") for s in head["snapshots"]}
        while snapshot is not None:
            chain.add(snapshot)
            snapshot = parents.get(snapshot)
        assert before_delete in chain, "our commits descend from the rolled-back head"
    else:
        assert "commit conflict" in outcome.get("error", ""), outcome
        assert current_snapshot_id(table) == before_delete, "nothing committed after the rollback"
        assert not compacted_files(table) - existing, "the rewritten files were removed"


def spark_delta_with_vectors(spark, path: Path) -> int:
    """Spark + Delta 4.0 with deletion vectors: two partitions, three small INSERTs of two tasks
    (v1-v3), then a DELETE writing vectors (v4). Returns the version before the DELETE."""
    t = f"delta.`{path}`"
    d.spark_sql(spark, f"CREATE TABLE {t} (id bigint, part string, v string) USING delta PARTITIONED BY (part) "
                       "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    for k in range(3):
        d.spark_sql(spark, f"INSERT INTO {t} SELECT /*+ REPARTITION(2) */ id, element_at(array('a', 'b'), "
                           f"cast(id % 2 as int) + 1), concat('v', id) FROM range({k * 100}, {k * 100 + 40})")
    before_delete = d.current_version(path)
    d.spark_sql(spark, f"DELETE FROM {t} WHERE id % 3 = 0")
    assert any("deletionVector" in a.get("add", {}) for a in d.commit_actions(path, before_delete + 1)), \
        "the DELETE wrote deletion vectors"
    return before_delete


def deltalake_with_deletes(path: Path) -> int:
    """deltalake: two partitions, three small appends (v0-v2), a delete (which rewrites each
    partition's files into one, v3), two more small appends (v4, v5: small files to compact
    beside the delete's). Returns the version before the delete."""

    def append(k: int) -> None:
        ids = list(range(k * 100, k * 100 + 40))
        rows = pa.table({"id": pa.array(ids, pa.int64()), "part": [("a", "b")[i % 2] for i in ids],
                         "v": [f"v{i}" for i in ids]})
        write_deltalake(str(path), rows, mode="append", partition_by=["part"])

    for k in range(3):
        append(k)
    before_delete = d.current_version(path)
    DeltaTable(str(path)).delete("id % 3 = 0")
    for k in range(3, 5):
        append(k)
    return before_delete


@pytest.mark.parametrize("writer", ["spark", "deltalake"])
def test_a_delta_restore_while_we_compact_aborts_our_commit(con, spark, tmp_path, monkeypatch, writer):
    """Issue 47 item 1, Delta. Our compaction reads the table after a DELETE (Spark: deletion
    vectors; deltalake: rewritten files) and applies it; while our commit is held back the table
    is restored to the version before the DELETE (Spark's `RESTORE TABLE … TO VERSION AS OF`,
    deltalake's `DeltaTable.restore`). Our commit must abort: nothing of ours is committed after
    the restore and Spark and deltalake read the restored version's rows."""
    path = tmp_path / f"restore_{writer}"
    before_delete = spark_delta_with_vectors(spark, path) if writer == "spark" else deltalake_with_deletes(path)
    restored_rows = d.rows_spark(spark, path, version=before_delete)
    assert len(restored_rows) == 120
    assert len(set(restored_rows) - set(d.rows_spark(spark, path))) == 40, "the DELETE took 40 rows"
    existing = d.data_listing(path)
    during: dict[str, Any] = {}

    def run():
        return call(con, "lakehouse_compact", path, small_file_threshold_mb=1.0, target_file_size_mb=8.0)

    def restore():
        if writer == "spark":
            d.spark_sql(spark, f"RESTORE TABLE delta.`{path}` TO VERSION AS OF {before_delete}")
        else:
            DeltaTable(str(path)).restore(before_delete)
        during["version"] = d.current_version(path)
        during["operation"] = next(a["commitInfo"]["operation"] for a in d.commit_actions(path, during["version"])
                                   if "commitInfo" in a)

    outcome = c.run_paused_before_commit(run, restore, lambda: bool(d.data_listing(path) - existing), monkeypatch,
                                         pause_ms=SPARK_PAUSE_MS)
    assert outcome["paused"], outcome
    assert during["operation"] == "RESTORE", during

    assert d.rows_spark(spark, path) == restored_rows, f"Spark reads the restored rows; outcome: {brief(outcome)}"
    assert d.rows_deltalake(path) == restored_rows
    assert "commit conflict" in outcome.get("error", ""), outcome
    assert d.current_version(path) == during["version"], "nothing committed after the restore"


# --------------------------------------------------------------------------- 2. delete formats on v3


@pytest.mark.parametrize("old_format", ["avro", "orc"])
def test_v3_vectors_do_not_resurrect_rows_of_avro_or_orc_position_deletes(con, spark, spark_warehouse, old_format):
    """Issue 47 item 2. A v2 merge-on-read table: a first DELETE writes Avro (ORC) position
    deletes (`write.delete.format.default`), a second Parquet ones, on the same data files; the
    table is upgraded to v3. After `lakehouse_rewrite_position_deletes` Spark reads the rows it
    read before. Spark follows the spec — once a data file has a deletion vector, only the vector
    applies (`DeleteFileIndex.forDataFile`) — so a vector made of the Parquet positions alone
    brings back every row only the Avro/ORC file deleted. The fix either folds those positions
    into the vector (the Avro/ORC files leave) or leaves such a data file alone, saying why."""
    name = f"mixed_deletes_{old_format}"
    ident, table = new_spark_table(
        spark, spark_warehouse, name, "id bigint, p string, v string",
        # Partition granularity: Spark 1.10 would otherwise fold the first DELETE's file-scoped
        # ORC deletes into the second DELETE's Parquet ones (it maintains one delete file per
        # data file), leaving no ORC file behind.
        {"format-version": "2", "write.delete.mode": "merge-on-read", "write.delete.format.default": old_format,
         "write.delete.granularity": "partition"})
    for i in range(2):
        spark.sql(f"INSERT INTO {ident} SELECT id, concat('p', id % 2), concat('v', id) FROM range({i * 20}, {i * 20 + 20})")
    spark.sql(f"DELETE FROM {ident} WHERE id % 5 = 0")  # 8 rows, in Avro/ORC
    spark.sql(f"ALTER TABLE {ident} SET TBLPROPERTIES ('write.delete.format.default'='parquet')")
    spark.sql(f"DELETE FROM {ident} WHERE id % 7 = 0")  # 4 more rows, in Parquet, same data files
    spark.sql(f"ALTER TABLE {ident} SET TBLPROPERTIES ('format-version'='3')")
    formats = sorted({r[0] for r in spark.sql(f"SELECT file_format FROM {ident}.delete_files").collect()})
    assert formats == sorted([old_format.upper(), "PARQUET"]), formats
    before = spark_rows(spark, ident)
    assert len(before) == 40 - 8 - 4

    done = rewrite(con, table)

    after = spark_rows(spark, ident)
    resurrected = sorted(set(after) - set(before))
    assert after == before, f"rows deleted only by the {old_format} file came back: {resurrected}; rewrite: {done}"
    # A partition whose Avro/ORC deletes stay live says why (naming the format).
    left = {f"p={r[0]}" for r in spark.sql(f"SELECT partition.p FROM {ident}.delete_files "
                                           f"WHERE file_format = '{old_format.upper()}'").collect()}
    reasons = {r["partition"]: (r["reason"] or "").lower() for r in done}
    assert all(old_format in reasons.get(p, "") for p in left), (left, done)


# --------------------------------------------------------------------------- 3. first_row_id inheritance


def upgraded_table(spark, warehouse: Path, name: str, one_partition_per_insert: bool) -> tuple[str, Path]:
    """A v2 table of three partitions (p0, p1, p2) and four small files each, upgraded to v3 (its
    manifests carry no first_row_id). ``one_partition_per_insert``: each INSERT writes one
    partition, so each manifest holds one partition's file; otherwise each INSERT writes all
    three, so each manifest holds a file of every partition."""
    ident, table = new_spark_table(spark, warehouse, name, "id bigint, p string, v string", {"format-version": "2"})
    if one_partition_per_insert:
        for i in range(4):
            for part in range(3):
                spark.sql(f"INSERT INTO {ident} SELECT id, 'p{part}', concat('v', id) "
                          f"FROM range({(i * 3 + part) * 10}, {(i * 3 + part) * 10 + 10})")
    else:
        for i in range(4):
            spark.sql(f"INSERT INTO {ident} SELECT id, concat('p', id % 3), concat('v', id) FROM range({i * 30}, {i * 30 + 30})")
    spark.sql(f"ALTER TABLE {ident} SET TBLPROPERTIES ('format-version'='3')")
    assert metadata_json(table)["format-version"] == 3
    files = dict(spark.sql(f"SELECT partition.p, count(*) FROM {ident}.files GROUP BY 1").collect())
    assert files == {"p0": 4, "p1": 4, "p2": 4}, files
    return ident, table


def manifest_partition_order(table: Path) -> list[str]:
    """The partition values (`p`) of the entries of the current snapshot's first data manifest,
    in the order the manifest holds them."""
    metadata = metadata_json(table)
    snapshot = next(s for s in metadata["snapshots"] if s["snapshot-id"] == metadata["current-snapshot-id"])
    with open(c.local_path(snapshot["manifest-list"]), "rb") as f:
        manifest = next(m for m in fastavro.reader(f) if m["content"] == 0)
    with open(c.local_path(manifest["manifest_path"]), "rb") as f:
        return [entry["data_file"]["partition"]["p"] for entry in fastavro.reader(f)]


def test_row_ids_stay_unique_when_partitions_are_compacted_one_at_a_time(con, spark, spark_warehouse):
    """Issue 47 item 3. Every INSERT of an upgraded table wrote a file of each of three
    partitions into one manifest. Compacting p0 rewrites those manifests into DELETED (p0) and
    EXISTING (p1, p2) entries, to which the v3 manifest list gives a `first_row_id`: ids are
    reserved for the EXISTING rows only, and Java's `ManifestReader` skips DELETED entries when
    it hands them out. Compacting p1, then p2, must then write the ids Spark reads: every row keeps
    the `_row_id` and `_last_updated_sequence_number` it had after the first compaction, and no two
    rows share an id. The code before counted the DELETED entry too, so the EXISTING entries after
    it read ids shifted past their range, which the next compaction wrote into the new file and
    into the rewritten manifest (rows changed ids; the issue saw duplicates on a larger table)."""
    ident, table = upgraded_table(spark, spark_warehouse, "lineage_two_steps", one_partition_per_insert=False)
    rows = spark_rows(spark, ident)
    # The partition of each manifest's first entry is compacted first: its DELETED entry then
    # comes before the EXISTING ones, the entries whose ids a miscount would shift.
    order = manifest_partition_order(table)
    assert sorted(order) == ["p0", "p1", "p2"], order

    first = compact(con, table, partitions=[f"p={order[0]}"])
    assert [r["partition"] for r in first if r["verdict"] == "compacted"] == [f"p={order[0]}"], first
    assigned = lineage_by_key(spark, ident)
    assert_unique_row_ids(assigned)
    statuses = [(r[0], r[1]) for r in spark.sql(f"SELECT status, data_file.partition.p FROM {ident}.entries").collect()]
    assert (2, order[0]) in statuses and (0, order[1]) in statuses, f"DELETED beside EXISTING entries: {statuses}"

    for part in order[1:]:
        done = compact(con, table, partitions=[f"p={part}"])
        assert [r["partition"] for r in done if r["verdict"] == "compacted"] == [f"p={part}"], done
        now = lineage_by_key(spark, ident)
        assert_unique_row_ids(now)
        moved = {k: (assigned[k], v) for k, v in now.items() if assigned[k] != v}
        assert not moved, f"after compacting {part}, {len(moved)} rows changed (_row_id, seq): {sorted(moved.items())[:5]}"
    assert spark_rows(spark, ident) == rows


# --------------------------------------------------------------------------- 4. partial progress on an upgraded table


@pytest.mark.parametrize("function", ["lakehouse_compact", "lakehouse_gate"])
def test_partial_progress_keeps_the_row_ids_the_first_batch_assigned(con, spark, spark_warehouse, function):
    """Issue 47 item 4. An upgraded table whose manifests have no `first_row_id` (each holds one
    partition's file) is compacted with partial progress, one batch per partition
    (`lakehouse_compact(partial_progress := true, max_commits := 3)`, and the gate, where partial
    progress is the default). The first batch's commit gives every old manifest a `first_row_id`,
    so from that snapshot on every row has an id (Spark reads it with time travel); the later
    batches must keep those ids — the code before read their rows before that commit, wrote NULL
    `_row_id`s and so gave them fresh ids at their own commits."""
    ident, table = upgraded_table(spark, spark_warehouse, f"lineage_batches_{function}", one_partition_per_insert=True)
    rows = spark_rows(spark, ident)
    options = "small_file_threshold_mb := 1, fragmentation_ratio_threshold := 0, target_file_size_mb := 8, max_commits := 3"
    if function == "lakehouse_compact":
        options += ", partial_progress := true"
    else:
        options += ", measure_speedup := false"
    cursor = con.execute(f"SELECT partition, verdict, \"commit\" FROM {function}('{table}', {options})")
    result = cursor.fetchall()
    assert sorted((p, v) for p, v, _ in result) == [("p=p0", "compacted"), ("p=p1", "compacted"), ("p=p2", "compacted")], result

    ours = replace_snapshots(table)
    assert ours, "our commits are replace snapshots"
    final = lineage_by_key(spark, ident)
    assert_unique_row_ids(final)
    for snapshot_id in ours:
        at_commit = lineage_by_key(spark, ident, snapshot_id)
        assert None not in [rid for rid, _ in at_commit.values()], "from the first v3 commit on every row has an id"
        changed = {k: (v, final[k]) for k, v in at_commit.items() if final[k] != v}
        assert not changed, (f"{len(changed)} of {len(final)} rows have another (_row_id, seq) now than at our "
                             f"commit {snapshot_id} (of {ours}): {sorted(changed.items())[:5]}")
    assert spark_rows(spark, ident) == rows


# --------------------------------------------------------------------------- 5. equality deletes on doubles


def float_table(spark, warehouse: Path, name: str) -> tuple[str, Path]:
    """A v2 table (id, p, x double) of two partitions, two small files each, holding 0.0, -0.0,
    NaN, 1.5 and NULL; then equality deletes on `x` committed through Iceberg's Java API
    (`RowDelta`): in p='a' of 0.0 and NaN, in p='b' of -0.0. The delete files are written with
    pyarrow (the spec's layout: the column's field id)."""
    ident, table = new_spark_table(spark, warehouse, name, "id bigint, p string, x double",
                                   {"format-version": "2", "write.delete.mode": "merge-on-read"})
    nan = "CAST('NaN' AS DOUBLE)"
    for part, base in (("a", 0), ("b", 10)):
        spark.sql(f"INSERT INTO {ident} VALUES ({base + 1}, '{part}', 0.0D), ({base + 2}, '{part}', -0.0D), "
                  f"({base + 3}, '{part}', {nan})")
        spark.sql(f"INSERT INTO {ident} VALUES ({base + 4}, '{part}', 1.5D), ({base + 5}, '{part}', NULL), "
                  f"({base + 6}, '{part}', -0.0D), ({base + 7}, '{part}', 0.0D), ({base + 8}, '{part}', {nan})")
    jvm = spark._jvm
    java_table = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, ident)
    field_id = java_table.schema().findField("x").fieldId()

    def equality_delete(part: str, values: list[float]) -> None:
        path = table / "data" / f"p={part}" / f"{uuid.uuid4()}-eq-deletes.parquet"
        schema = pa.schema([pa.field("x", pa.float64(), metadata={"PARQUET:field_id": str(field_id)})])
        pq.write_table(pa.table({"x": pa.array(values, pa.float64())}, schema=schema), path)
        ids = spark.sparkContext._gateway.new_array(jvm.int, 1)
        ids[0] = field_id
        delete_file = (
            jvm.org.apache.iceberg.FileMetadata.deleteFileBuilder(java_table.spec())
            .ofEqualityDeletes(ids)
            .withPath(str(path))
            .withFormat(jvm.org.apache.iceberg.FileFormat.PARQUET)
            .withFileSizeInBytes(os.path.getsize(path))
            .withRecordCount(len(values))
            .withPartitionPath(f"p={part}")
            .build()
        )
        java_table.newRowDelta().addDeletes(delete_file).commit()
        java_table.refresh()

    equality_delete("a", [0.0, float("nan")])
    equality_delete("b", [-0.0])
    return ident, table


def float_rows(spark, ident: str) -> list[tuple]:
    """(id, p, x as Spark prints it: '-0.0', '0.0', 'NaN', None) — the sign of zero kept."""
    return sorted(tuple(r) for r in spark.sql(f"SELECT id, p, CAST(x AS STRING) FROM {ident}").collect())


def assert_same_float_rows(after: list[tuple], before: list[tuple], result: list[dict]) -> None:
    missing, extra = sorted(set(before) - set(after)), sorted(set(after) - set(before))
    assert after == before, f"rows lost: {missing}, rows back: {extra}; {[(r['partition'], r['reason']) for r in result]}"


def java_reads(rows: list[tuple]) -> None:
    """What Spark (Java's DeleteFilter) reads from float_table: 0.0 deletes +0.0 only, -0.0 deletes
    -0.0 only, NaN deletes NaN — asserted so the test notices if Spark changes."""
    assert rows == [
        (2, "a", "-0.0"), (4, "a", "1.5"), (5, "a", None), (6, "a", "-0.0"),
        (11, "b", "0.0"), (13, "b", "NaN"), (14, "b", "1.5"), (15, "b", None), (17, "b", "0.0"), (18, "b", "NaN"),
    ], rows


def test_compaction_applies_equality_deletes_on_doubles_as_java_does(con, spark, spark_warehouse):
    """Issue 47 item 5. Compaction with equality deletes on a double column keeps the rows Spark
    keeps: a delete of 0.0 leaves -0.0 rows (and one of -0.0 leaves 0.0 rows), a delete of NaN
    removes NaN rows. The code before compared with `IS NOT DISTINCT FROM`, where -0.0 = 0.0."""
    ident, table = float_table(spark, spark_warehouse, "eq_doubles_compact")
    before = float_rows(spark, ident)
    java_reads(before)

    plans = compact(con, table)
    assert sorted(p["verdict"] for p in plans) == ["compacted", "compacted"], plans

    assert_same_float_rows(float_rows(spark, ident), before, plans)


def test_equality_to_position_conversion_on_doubles_matches_java(con, spark, spark_warehouse):
    """Issue 47 item 5. `lakehouse_rewrite_position_deletes(convert_equality_deletes := true)`
    turns the equality deletes on a double column into the positions of exactly the rows Spark
    deletes (-0.0 and 0.0 told apart, NaN equal to NaN)."""
    ident, table = float_table(spark, spark_warehouse, "eq_doubles_convert")
    before = float_rows(spark, ident)
    java_reads(before)

    done = rewrite(con, table, convert_equality_deletes="true")

    assert_same_float_rows(float_rows(spark, ident), before, done)
