"""lakehouse_compact on tables written by pyiceberg and by lakehouse_demo.

Every test compares the rows a reader we did not write returns before and after compaction
(pyiceberg's scan and DuckDB's iceberg extension), as multisets.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.expressions import EqualTo
from pyiceberg.table import StaticTable
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import StringType

import conftest as c

FN = "lakehouse_compact"


def _comparable(value):
    """NaN equals nothing, not even itself: compare it as a marker."""
    return "NaN" if isinstance(value, float) and value != value else value


def sorted_rows(table: pa.Table) -> list[tuple]:
    cols = sorted(table.column_names)
    rows = zip(*([_comparable(v) for v in table.column(n).to_pylist()] for n in cols))
    return sorted(rows, key=repr)


def pyiceberg_rows(table) -> list[tuple]:
    return sorted_rows(table.scan().to_arrow())


def duckdb_rows(iceberg_con, metadata_location: str) -> list[tuple]:
    return sorted_rows(iceberg_con.execute(f"SELECT * FROM iceberg_scan('{metadata_location}')").to_arrow_table())


def compact(con, table: str, **params) -> list[dict]:
    args = "".join(f", {k} := {v!r}" if not isinstance(v, bool) else f", {k} := {str(v).lower()}" for k, v in params.items())
    cur = con.execute(f"SELECT * FROM {FN}('{table}'{args})")
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r)) for r in cur.fetchall()]


def files_by_partition(table) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for row in table.inspect.files().to_pylist():
        if row["content"] == 0:
            out.setdefault(repr(row["partition"]), set()).add(row["file_path"])
    return out


BUILDERS = {
    "by_date": c.build_identity_date,
    "unpartitioned": c.build_unpartitioned,
    "day_bucket": c.build_day_bucket,
    "time_transforms": c.build_time_transforms,
    "evolved": c.build_evolved_spec,
}


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_rows_identical_after_compaction(con, iceberg_con, catalog, name):
    table = BUILDERS[name](catalog)
    before = pyiceberg_rows(table)
    assert before == duckdb_rows(iceberg_con, table.metadata_location)
    files_before = sum(len(v) for v in files_by_partition(table).values())

    result = compact(con, f"{c.NAMESPACE}.{name}", catalog_uri=catalog.test_uri,
                     small_file_threshold_mb=1.0, target_file_size_mb=8.0)
    compacted = [r for r in result if r["verdict"] == "compacted"]
    assert compacted, result
    assert len({r["snapshot_id"] for r in result}) == 1

    table = catalog.load_table(f"{c.NAMESPACE}.{name}")
    assert table.metadata.current_snapshot().summary.operation.value == "replace"
    assert table.metadata.current_snapshot().snapshot_id == result[0]["snapshot_id"]
    assert table.metadata_location == result[0]["metadata_location"]
    assert pyiceberg_rows(table) == before
    assert duckdb_rows(iceberg_con, table.metadata_location) == before
    files_after = sum(len(v) for v in files_by_partition(table).values())
    assert files_after == files_before - sum(r["input_files"] for r in result) + sum(r["output_files"] for r in result)
    assert files_after < files_before

    # Engines we did not write can keep writing: a pyiceberg append on top of our snapshot.
    extra = table.scan(limit=3).to_arrow()
    table.append(extra)
    table = catalog.load_table(f"{c.NAMESPACE}.{name}")
    assert len(pyiceberg_rows(table)) == len(before) + 3

    # Nothing left to do (thresholds now met): no snapshot.
    again = compact(con, f"{c.NAMESPACE}.{name}", catalog_uri=catalog.test_uri,
                    small_file_threshold_mb=1.0, target_file_size_mb=8.0, min_input_files=100)
    assert all(r["snapshot_id"] is None for r in again), again
    assert catalog.load_table(f"{c.NAMESPACE}.{name}").metadata_location == table.metadata_location


def test_healthy_partitions_keep_their_files_and_bounds_prune_correctly(con, iceberg_con, catalog):
    table = c.build_identity_date(catalog)
    before = pyiceberg_rows(table)
    files_before = files_by_partition(table)
    sizes = {r["file_path"]: r["file_size_in_bytes"] for r in table.inspect.files().to_pylist()}
    threshold_mb = (max(sizes.values()) - 1) / 1024 / 1024  # only the big file of 2026-10-03 is not small
    result = compact(con, f"{c.NAMESPACE}.by_date", catalog_uri=catalog.test_uri,
                     small_file_threshold_mb=threshold_mb, target_file_size_mb=64.0)
    verdicts = {r["partition"]: r["verdict"] for r in result}
    assert verdicts == {
        "partition_date=2026-10-01": "compacted",
        "partition_date=2026-10-02": "compacted",
        "partition_date=2026-10-03": "healthy",
    }
    table = catalog.load_table(f"{c.NAMESPACE}.by_date")
    files_after = files_by_partition(table)
    healthy = [k for k in files_before if "2026, 10, 3" in k or "20729" in k]
    assert healthy and all(files_after[k] == files_before[k] for k in healthy)
    assert all(len(files_after[k]) == 1 for k in files_after if k not in healthy)
    assert pyiceberg_rows(table) == before
    # Bounds in our manifest entries must never hide rows from pruning readers.
    for probe in (3, 12, 114, 10_001, 29_999):
        got_py = sorted_rows(table.scan(row_filter=EqualTo("id", probe)).to_arrow())
        got_duck = sorted_rows(iceberg_con.execute(
            f"SELECT * FROM iceberg_scan('{table.metadata_location}') WHERE id = {probe}").to_arrow_table())
        assert len(got_py) == 1 and got_py == got_duck, (probe, got_py, got_duck)
    # String bounds too: the smallest and largest payloads of each compacted file's inputs.
    for probe in (f"row-{i}-" + "x" * 20 for i in (0, 84, 10, 94, 104, 114)):
        got_py = sorted_rows(table.scan(row_filter=EqualTo("payload", probe)).to_arrow())
        got_duck = sorted_rows(iceberg_con.execute(
            f"SELECT * FROM iceberg_scan('{table.metadata_location}') WHERE payload = '{probe}'").to_arrow_table())
        assert len(got_py) == 1 and got_py == got_duck, (probe, got_py, got_duck)
    bounds = {r["file_path"]: r for r in table.inspect.files().to_pylist()}
    new_files = [r for p, r in bounds.items() if p.endswith("-compacted.parquet")]
    assert new_files and all(r["lower_bounds"] and r["upper_bounds"] for r in new_files)


def test_dry_run_changes_nothing(con, catalog):
    table = c.build_identity_date(catalog)
    location = table.metadata_location
    root = Path(c.local_path(table.location()))
    listing = sorted(str(p) for p in root.rglob("*"))
    result = compact(con, f"{c.NAMESPACE}.by_date", catalog_uri=catalog.test_uri,
                     small_file_threshold_mb=1.0, target_file_size_mb=8.0, dry_run=True)
    assert {r["verdict"] for r in result} == {"would compact", "healthy"}  # one small file: nothing to merge
    assert all(r["snapshot_id"] is None and r["dry_run"] for r in result)
    assert sum(r["output_files"] for r in result) >= 1
    assert catalog.load_table(f"{c.NAMESPACE}.by_date").metadata_location == location
    assert sorted(str(p) for p in root.rglob("*")) == listing


def test_partitions_with_delete_files_are_skipped_when_deletes_are_not_applied(con, iceberg_con, catalog):
    table, _ = c.build_with_deletes(catalog)
    # A second small file per day: something to merge (one small file alone is healthy, deletes
    # or not: compaction leaves it alone either way).
    for day in (1, 2, 3):
        table.append(c._date_rows(range(day * 1000 + 500, day * 1000 + 510), dt.date(2026, 10, day)))
    table = table.refresh()
    before = duckdb_rows(iceberg_con, table.metadata_location)
    result = compact(con, f"{c.NAMESPACE}.with_deletes", catalog_uri=catalog.test_uri,
                     small_file_threshold_mb=1.0, target_file_size_mb=8.0, apply_deletes=False)
    skipped = [r for r in result if r["reason"].startswith("skipped: has")]
    assert skipped, result
    assert all(r["files_after"] == r["files_before"] for r in skipped)
    table = catalog.load_table(f"{c.NAMESPACE}.with_deletes")
    # pyiceberg 0.12 cannot read equality deletes: DuckDB's iceberg extension is the reader here.
    assert duckdb_rows(iceberg_con, table.metadata_location) == before


def test_partitions_list_limits_the_work(con, catalog):
    c.build_identity_date(catalog)
    result = compact(con, f"{c.NAMESPACE}.by_date", catalog_uri=catalog.test_uri, small_file_threshold_mb=1.0,
                     target_file_size_mb=8.0, partitions=["partition_date=2026-10-02"])
    verdicts = {r["partition"]: r["verdict"] for r in result}
    assert verdicts["partition_date=2026-10-02"] == "compacted"
    assert verdicts["partition_date=2026-10-01"] == "skipped"


def test_sort_order_is_honoured(con, catalog):
    table = c.build_unpartitioned(catalog)
    with table.update_sort_order() as update:
        update.desc("id", IdentityTransform())
    table = catalog.load_table(f"{c.NAMESPACE}.unpartitioned")
    compact(con, f"{c.NAMESPACE}.unpartitioned", catalog_uri=catalog.test_uri,
            small_file_threshold_mb=1.0, target_file_size_mb=8.0)
    table = catalog.load_table(f"{c.NAMESPACE}.unpartitioned")
    (new_file,) = [r["file_path"] for r in table.inspect.files().to_pylist()]
    ids = con.execute(f"SELECT id FROM read_parquet('{c.local_path(new_file)}')").fetchall()
    assert [i for (i,) in ids] == sorted((i for (i,) in ids), reverse=True)


def test_demo_table_by_path_then_readers_agree(con, iceberg_con, tmp_path):
    path = tmp_path / "demo"
    (md,) = con.execute(f"SELECT metadata_location FROM lakehouse_demo('{path}')").fetchone()
    before = duckdb_rows(iceberg_con, md)
    result = compact(con, str(path), small_file_threshold_mb=0.064, target_file_size_mb=0.128)
    assert [r["verdict"] for r in result] == ["compacted", "compacted", "healthy", "healthy"]
    new_md = result[0]["metadata_location"]
    assert new_md.endswith("v17.metadata.json")
    assert (path / "metadata" / "version-hint.text").read_text().strip() == "17"
    assert duckdb_rows(iceberg_con, str(path)) == before  # DuckDB follows version-hint.text
    assert sorted_rows(StaticTable.from_metadata(new_md).scan().to_arrow()) == before
    profile = con.execute(
        f"SELECT partition, total_files FROM lakehouse_fragmentation('{path}', small_file_threshold_mb := 0.064)"
    ).fetchall()
    by_partition = dict(profile)
    assert by_partition["partition_date=2026-10-03"] == 20 and by_partition["partition_date=2026-10-04"] == 25
    assert by_partition["partition_date=2026-10-01"] < 52 and by_partition["partition_date=2026-10-02"] < 70


def _compact_while(con, catalog, concurrent_change, monkeypatch):
    """Runs compaction in a thread, holding its commit back while `concurrent_change` commits."""
    monkeypatch.setenv("LAKEHOUSE_TEST_PAUSE_BEFORE_COMMIT_MS", "1500")
    outcome: dict = {}

    def run():
        try:
            outcome["rows"] = compact(con, f"{c.NAMESPACE}.by_date", catalog_uri=catalog.test_uri,
                                      small_file_threshold_mb=1.0, target_file_size_mb=8.0)
        except Exception as e:  # noqa: BLE001 - reported to the test below
            outcome["error"] = str(e)

    worker = threading.Thread(target=run)
    worker.start()
    time.sleep(0.7)  # the rewrite of this small table takes well under that
    concurrent_change()
    worker.join(timeout=60)
    return outcome


def test_concurrent_append_is_rebased(con, iceberg_con, catalog, monkeypatch):
    table = c.build_identity_date(catalog)
    before = pyiceberg_rows(table)
    extra = c._date_rows(range(90_000, 90_004), dt.date(2026, 10, 1))
    outcome = _compact_while(con, catalog, lambda: catalog.load_table(f"{c.NAMESPACE}.by_date").append(extra), monkeypatch)
    assert "error" not in outcome, outcome
    table = catalog.load_table(f"{c.NAMESPACE}.by_date")
    assert table.metadata.current_snapshot().summary.operation.value == "replace"
    expected = sorted(before + sorted_rows(extra), key=repr)
    assert pyiceberg_rows(table) == expected
    assert duckdb_rows(iceberg_con, table.metadata_location) == expected


def test_concurrent_delete_of_a_replaced_file_aborts_and_cleans_up(con, iceberg_con, catalog, monkeypatch):
    table = c.build_identity_date(catalog)
    root = Path(c.local_path(table.location()))
    outcome = _compact_while(
        con, catalog, lambda: catalog.load_table(f"{c.NAMESPACE}.by_date").delete(EqualTo("id", 3)), monkeypatch
    )
    assert "commit conflict" in outcome.get("error", ""), outcome
    assert outcome["error"].startswith(f"Invalid Input Error: {FN}:") or f"{FN}:" in outcome["error"]
    assert not list(root.rglob("*-compacted.parquet")), "rewritten files must be removed"
    table = catalog.load_table(f"{c.NAMESPACE}.by_date")
    assert table.metadata.current_snapshot().summary.operation.value != "replace"
    rows = pyiceberg_rows(table)
    assert rows == duckdb_rows(iceberg_con, table.metadata_location)
    assert table.scan(row_filter=EqualTo("id", 3)).to_arrow().num_rows == 0, "the concurrent delete stands"


def test_files_without_field_ids_keep_their_values(con, catalog, tmp_path):
    """Files registered with pyiceberg add_files carry no Parquet field ids; they must be read by
    name (as Iceberg's name mapping does), never as all-NULL columns."""
    table = catalog.create_table(f"{c.NAMESPACE}.added", schema=c._DATE_SCHEMA, partition_spec=c._DATE_SPEC)
    data = tmp_path / "plain"
    data.mkdir()
    paths = []
    for i in range(6):
        path = data / f"f{i}.parquet"
        con.execute(
            f"COPY (SELECT (range + {i * 100})::BIGINT AS id, DATE '2026-10-01' AS event_date, "
            f"'p' || range AS payload FROM range(50)) TO '{path}' (FORMAT parquet)"
        )
        paths.append(str(path))
    assert con.execute(f"SELECT count(field_id) FROM parquet_schema('{paths[0]}')").fetchone()[0] == 0
    table.add_files(paths)
    table = catalog.load_table(f"{c.NAMESPACE}.added")
    before = pyiceberg_rows(table)
    assert all(None not in r for r in before)
    result = compact(con, f"{c.NAMESPACE}.added", catalog_uri=catalog.test_uri,
                     small_file_threshold_mb=1.0, target_file_size_mb=8.0)
    assert result[0]["verdict"] == "compacted", result
    table = catalog.load_table(f"{c.NAMESPACE}.added")
    assert pyiceberg_rows(table) == before


def test_float_and_decimal_bounds_never_hide_rows(con, iceberg_con, catalog):
    """Bounds for float, double and decimal columns: NaN is never a bound, signed zeros are both
    covered, decimals keep their scale; point lookups through pruning readers find every row."""
    import decimal

    from pyiceberg.schema import Schema
    from pyiceberg.types import DecimalType, DoubleType, FloatType, LongType, NestedField

    schema = Schema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(2, "f", FloatType(), required=False),
        NestedField(3, "d", DoubleType(), required=False),
        NestedField(4, "amount", DecimalType(10, 2), required=False),
    )
    table = catalog.create_table(f"{c.NAMESPACE}.floats", schema=schema)
    batches = [
        ([1, 2, 3], [0.5, -0.0, 2.25], [float("nan"), -0.0, 1.5], ["-12.34", "0.10", "99.99"]),
        ([4, 5, 6], [0.0, -7.5, None], [0.0, -1e300, float("inf")], ["0.00", "-0.01", None]),
        ([7, 8], [3.0, 1.25], [2.5, -2.5], ["12345678.90", "-5.50"]),
    ]
    arrow_schema = pa.schema([("id", pa.int64()), ("f", pa.float32()), ("d", pa.float64()),
                              ("amount", pa.decimal128(10, 2))])
    for ids, fs, ds, amounts in batches:
        table.append(pa.table({"id": ids, "f": fs, "d": ds,
                               "amount": [decimal.Decimal(a) if a else None for a in amounts]}, schema=arrow_schema))
    table = catalog.load_table(f"{c.NAMESPACE}.floats")
    before = pyiceberg_rows(table)
    result = compact(con, f"{c.NAMESPACE}.floats", catalog_uri=catalog.test_uri,
                     small_file_threshold_mb=1.0, target_file_size_mb=8.0)
    assert result[0]["verdict"] == "compacted", result
    table = catalog.load_table(f"{c.NAMESPACE}.floats")
    assert pyiceberg_rows(table) == before
    (entry,) = table.inspect.files().to_pylist()
    # DuckDB writes no statistics for a column holding NaN (d); the others get bounds.
    assert {k for k, _ in entry["lower_bounds"]} >= {2, 4}, "float and decimal bounds are written"
    assert 3 not in {k for k, _ in entry["upper_bounds"]}, "no bound may stand for a column with NaN"
    for column, probe in [("f", 0.5), ("f", 0.0), ("f", -7.5), ("f", 3.0), ("d", 0.0), ("d", -1e300),
                          ("d", 2.5), ("d", float("inf")), ("amount", decimal.Decimal("12345678.90")),
                          ("amount", decimal.Decimal("-12.34")), ("amount", decimal.Decimal("0.00"))]:
        want = [r for r in before if r[sorted(["id", "f", "d", "amount"]).index(column)] == probe]
        got = sorted_rows(table.scan(row_filter=EqualTo(column, probe)).to_arrow())
        assert want and got == want, (column, probe, got, want)
    for where in ("d = 'NaN'::DOUBLE", "f = 1.25", "f = -7.5", "amount = 12345678.90", "d = -1e300"):
        n_duck = iceberg_con.execute(
            f"SELECT count(*) FROM iceberg_scan('{table.metadata_location}') WHERE {where}").fetchone()[0]
        assert n_duck == 1, (where, n_duck)


def test_output_files_land_near_the_target_whatever_the_codec_does(con, iceberg_con, catalog):
    """Groups are sized on the rewrite's measured output size: here the inputs are zstd files
    of compressible rows and the table asks for uncompressed output (about 6x larger), so groups
    planned on input bytes would write files several times the target."""
    table = catalog.create_table(f"{c.NAMESPACE}.codec", schema=c._DATE_SCHEMA, partition_spec=c._DATE_SPEC)
    for i in range(24):
        table.append(c._date_rows(range(i * 4000, i * 4000 + 4000), dt.date(2026, 10, 1)))
    with table.transaction() as tx:
        tx.set_properties({"write.parquet.compression-codec": "uncompressed"})
    table = catalog.load_table(f"{c.NAMESPACE}.codec")
    before = pyiceberg_rows(table)
    input_bytes = sum(r["file_size_in_bytes"] for r in table.inspect.files().to_pylist())
    target_mb = 0.5
    result = compact(con, f"{c.NAMESPACE}.codec", catalog_uri=catalog.test_uri,
                     small_file_threshold_mb=0.4, target_file_size_mb=target_mb)
    assert result[0]["verdict"] == "compacted", result
    table = catalog.load_table(f"{c.NAMESPACE}.codec")
    sizes = [r["file_size_in_bytes"] for r in table.inspect.files().to_pylist()]
    target = target_mb * 1024 * 1024
    assert sum(sizes) > 3 * input_bytes, "the rewrite really is larger than its inputs"
    assert len(sizes) > round(input_bytes / target), "more files than input-byte planning would write"
    assert all(0.5 * target <= s <= 1.6 * target for s in sizes), (sorted(sizes), target)
    assert pyiceberg_rows(table) == before
    assert duckdb_rows(iceberg_con, table.metadata_location) == before
    summary = json.loads(con.execute(
        f"SELECT lakehouse_compact('{c.NAMESPACE}.codec', '{{\"catalog_uri\": \"{catalog.test_uri}\", \"dry_run\": true, \"small_file_threshold_mb\": 0.4, \"target_file_size_mb\": 0.5}}')"
    ).fetchone()[0])
    assert summary["partitions_compacted"] == 0


def _nested_table(catalog, name: str):
    from pyiceberg.schema import Schema
    from pyiceberg.types import IntegerType, ListType, LongType, MapType, NestedField, StringType, StructType

    schema = Schema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(2, "s", StructType(NestedField(3, "x", IntegerType(), required=False),
                                       NestedField(4, "y", StringType(), required=False)), required=False),
        NestedField(5, "l", ListType(6, LongType(), element_required=False), required=False),
        NestedField(7, "m", MapType(8, StringType(), 9, LongType(), value_required=False), required=False),
    )
    return catalog.create_table(f"{c.NAMESPACE}.{name}", schema=schema)


def _nested_rows(start: int, n: int, schema) -> pa.Table:
    from pyiceberg.io.pyarrow import schema_to_pyarrow

    rows = [
        {
            "id": i,
            "s": None if i % 5 == 0 else {"x": None if i % 3 == 0 else i, "y": f"y{i}"},
            "l": None if i % 7 == 0 else list(range(i % 4)),
            "m": {f"k{i}": i, "z": None} if i % 2 else {},
        }
        for i in range(start, start + n)
    ]
    return pa.Table.from_pylist(rows, schema=schema_to_pyarrow(schema))


def test_nested_columns_are_rewritten_by_field_id(con, iceberg_con, catalog):
    """Struct, list and map columns survive a rewrite; a top-level rename and a struct field
    added later resolve by id, as Iceberg readers resolve them; struct leaves keep their counts."""
    table = _nested_table(catalog, "nested")
    for i in range(3):
        table.append(_nested_rows(i * 10, 10, table.schema()))
    with table.update_schema() as update:
        update.rename_column("id", "key")
        update.add_column(("s", "z"), StringType())
    table = table.refresh()
    for i in range(3, 5):
        rows = _nested_rows(i * 10, 10, table.schema())
        table.append(rows)
    table = table.refresh()
    before = pyiceberg_rows(table)
    assert before == duckdb_rows(iceberg_con, table.metadata_location)
    result = compact(con, f"{c.NAMESPACE}.nested", catalog_uri=catalog.test_uri, small_file_threshold_mb=1.0,
                     target_file_size_mb=8.0)
    assert [r["verdict"] for r in result] == ["compacted"], result
    table = catalog.load_table(f"{c.NAMESPACE}.nested")
    assert pyiceberg_rows(table) == before
    assert duckdb_rows(iceberg_con, table.metadata_location) == before
    (entry,) = table.inspect.files().to_pylist()
    x = table.schema().find_field("s.x").field_id
    assert dict(entry["value_counts"]).get(x) == 50, "the struct leaf s.x is counted"
    assert dict(entry["null_value_counts"])[x] == sum(1 for i in range(50) if i % 5 == 0 or i % 3 == 0)


def test_a_renamed_nested_field_is_skipped_not_read_as_null(con, iceberg_con, catalog):
    """DuckDB reads struct children by name: files written before `s.x` became `s.xx` would give
    NULLs. Their partition is skipped with the reason, in the dry run as in the real run, and
    nothing is written."""
    table = _nested_table(catalog, "nested_renamed")
    for i in range(3):
        table.append(_nested_rows(i * 10, 10, table.schema()))
    with table.update_schema() as update:
        update.rename_column(("s", "x"), "xx")
    table = table.refresh()
    before = pyiceberg_rows(table)
    location = table.metadata_location
    data_dir = Path(c.local_path(table.location())) / "data"
    files = sorted(data_dir.rglob("*.parquet"))
    x = table.schema().find_field("s.xx").field_id
    want = (f"skipped: a data file's nested field 'x' (id {x}) is now named 'xx'; nested fields are read by name, "
            "so its files are not rewritten")
    for dry_run in (True, False):
        result = compact(con, f"{c.NAMESPACE}.nested_renamed", catalog_uri=catalog.test_uri, small_file_threshold_mb=1.0,
                         target_file_size_mb=8.0, dry_run=dry_run)
        assert [(r["verdict"], r["reason"], r["snapshot_id"]) for r in result] == [("skipped", want, None)], result
    table = catalog.load_table(f"{c.NAMESPACE}.nested_renamed")
    assert table.metadata_location == location
    assert sorted(data_dir.rglob("*.parquet")) == files
    assert pyiceberg_rows(table) == before


def test_manifests_left_without_live_files_are_not_carried_forward(con, iceberg_con, catalog):
    """A compaction's snapshot keeps one manifest of DELETED entries per manifest it emptied (its
    record of what it removed); the next commit drops it, as Java's snapshot producers keep only
    manifests with added or existing files or written by the committing snapshot."""
    table = c.build_unpartitioned(catalog)
    args = dict(catalog_uri=catalog.test_uri, small_file_threshold_mb=1.0, target_file_size_mb=8.0)
    compact(con, f"{c.NAMESPACE}.unpartitioned", **args)
    table = table.refresh()
    first = table.current_snapshot().snapshot_id
    emptied = [m for m in table.inspect.manifests().to_pylist()
               if m["added_data_files_count"] == 0 and m["existing_data_files_count"] == 0]
    assert emptied and all(m["added_snapshot_id"] == first for m in emptied), emptied
    for i in range(2):
        table.append(pa.table({"id": pa.array(range(5), pa.int64()), "name": [f"again{i}"] * 5}))
    before = pyiceberg_rows(table.refresh())
    compact(con, f"{c.NAMESPACE}.unpartitioned", **args)
    table = table.refresh()
    current = table.current_snapshot().snapshot_id
    manifests = table.inspect.manifests().to_pylist()
    assert not {m["path"] for m in manifests} & {m["path"] for m in emptied}
    for m in manifests:
        assert m["added_data_files_count"] + m["existing_data_files_count"] > 0 or m["added_snapshot_id"] == current, m
    assert pyiceberg_rows(table) == before == duckdb_rows(iceberg_con, table.metadata_location)


def _manifest_partitions(table) -> dict[str, set]:
    """Each manifest of the current snapshot (by path) with the partitions of its live entries."""
    return {
        m.manifest_path: {e.data_file.partition[0] for e in m.fetch_manifest_entry(table.io, discard_deleted=True)}
        for m in table.current_snapshot().manifests(table.io)
    }


def test_manifests_of_healthy_partitions_are_named_as_they_are(con, iceberg_con, catalog):
    """The plan decodes only the manifests holding a partition that needs compaction (a table of
    a million files holds the degraded partitions' files, not every file): every other manifest
    is named by the new snapshot as it was, a healthy partition whose files are spread over a
    decoded and a carried manifest is still judged on all of them, and the snapshot's totals
    still count every file of the table, as pyiceberg lists them."""
    table = c.build_identity_date(catalog)  # 10-01 and 10-02: 12 small appends; 10-03: one big file
    day = lambda d: (d - dt.date(1970, 1, 1)).days  # noqa: E731
    # One manifest holding a small file of degraded 10-01 and a big one of healthy 10-03.
    table.append(pa.concat_tables([c._date_rows(range(500, 505), dt.date(2026, 10, 1)),
                                   c._date_rows(range(40_000, 60_000), dt.date(2026, 10, 3))]))
    table = table.refresh()
    sizes = {r["file_path"]: r["file_size_in_bytes"] for r in table.inspect.files().to_pylist()}
    big = min(s for s in sizes.values() if s > 100_000)
    assert max(s for s in sizes.values() if s < 100_000) < 20_000 < big
    held = _manifest_partitions(table)
    healthy_only = {path for path, parts in held.items() if parts == {day(dt.date(2026, 10, 3))}}
    decoded = set(held) - healthy_only
    assert len(healthy_only) == 1 and any(day(dt.date(2026, 10, 3)) in held[p] for p in decoded), held
    before = pyiceberg_rows(table)
    result = compact(con, f"{c.NAMESPACE}.by_date", catalog_uri=catalog.test_uri, small_file_threshold_mb=0.02,
                     target_file_size_mb=8.0)
    verdicts = {r["partition"]: (r["verdict"], r["files_before"]) for r in result}
    assert len(result) == len(verdicts) and verdicts == {
        "partition_date=2026-10-01": ("compacted", 7),
        "partition_date=2026-10-02": ("compacted", 6),
        "partition_date=2026-10-03": ("healthy", 2),
    }, result
    table = table.refresh()
    after = _manifest_partitions(table)
    # The healthy partition's own manifest is named as it was; every manifest that held a file of
    # a compacted partition was rewritten.
    assert healthy_only <= set(after) and not decoded & set(after), (held, after)
    # The snapshot's own manifests: its new file's, the mixed one rewritten, and one listing
    # DELETED the files of the twelve manifests it emptied (not one manifest each): every
    # replaced file exactly once.
    current = table.current_snapshot().snapshot_id
    own = [m for m in table.current_snapshot().manifests(table.io) if m.added_snapshot_id == current]
    assert len(own) == 3, [(m.manifest_path, m.added_files_count, m.existing_files_count, m.deleted_files_count)
                           for m in own]
    deleted = [e.data_file.file_path for m in own for e in m.fetch_manifest_entry(table.io, discard_deleted=False)
               if e.status.name == "DELETED"]
    replaced = {p for p, size in sizes.items() if size < 20_000 and "partition_date=2026-10-03" not in p}
    assert sorted(deleted) == sorted(replaced) and len(deleted) == 13, (deleted, replaced)
    files = [r for r in table.inspect.files().to_pylist() if r["content"] == 0]
    summary = table.current_snapshot().summary
    assert int(summary["total-data-files"]) == len(files) == 4
    assert int(summary["total-records"]) == sum(r["record_count"] for r in files)
    assert int(summary["total-files-size"]) == sum(r["file_size_in_bytes"] for r in files)
    assert pyiceberg_rows(table) == before == duckdb_rows(iceberg_con, table.metadata_location)
