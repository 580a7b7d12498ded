"""Options that would do nothing are named, not passed over (issue 49, item 9).

- A `partitions := [...]` value that matches no partition is an error naming it and listing the
  table's partitions, before anything is written (compaction, its scalar form, the gate).
- An option of one format only (`skip_recent_partitions`, `latest_metadata`, `retain_last`, …:
  Iceberg's) given for a Delta table: `lakehouse_compact` refuses it, naming the option and the
  format; the gate (one options template for many tables, as the webhook server runs it) and the
  scalar form ignore it and say so in the result's warning. An Iceberg table takes them as before.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import delta_tables as d

SMALL = "small_file_threshold_mb := 0.064, target_file_size_mb := 0.128"


def demo(con, path: Path) -> str:
    con.execute(f"SELECT * FROM lakehouse_demo('{path}', snapshots := 4)").fetchall()
    return str(path)


def metadata_files(path: str) -> int:
    return len(list(Path(path, "metadata").glob("*.metadata.json")))


def error_of(con, sql: str) -> str:
    with pytest.raises(Exception) as raised:
        con.execute(sql).fetchall()
    return str(raised.value)


def test_a_partition_value_matching_nothing_is_an_error_naming_it(con, tmp_path):
    table = demo(con, tmp_path / "t")
    typo = "['partition_date=2026-10-1', 'partition_date=2026-10-02']"
    message = error_of(con, f"SELECT * FROM lakehouse_compact('{table}', {SMALL}, partitions := {typo})")
    assert message.endswith(
        "lakehouse_compact: partitions 'partition_date=2026-10-1' matches no partition of the table (labels as "
        "lakehouse_fragmentation prints them); its partitions: 'partition_date=2026-10-01', "
        "'partition_date=2026-10-02', 'partition_date=2026-10-03', 'partition_date=2026-10-04'"), message
    message = error_of(con, f"SELECT * FROM lakehouse_gate('{table}', {SMALL}, partitions := {typo})")
    assert "lakehouse_gate: partitions 'partition_date=2026-10-1' matches no partition" in message, message
    (summary,) = con.execute(
        f"""SELECT lakehouse_compact('{table}', '{{"partitions": ["x=1", "y"]}}')""").fetchone()
    assert json.loads(summary)["error"].startswith("lakehouse_compact: partitions 'x=1', 'y' match no partition")
    assert metadata_files(table) == 4, "nothing was committed"
    # Every value matching: the run goes ahead.
    rows = con.execute(f"SELECT partition, verdict FROM lakehouse_compact('{table}', {SMALL}, "
                       "partitions := ['partition_date=2026-10-02'])").fetchall()
    assert ("partition_date=2026-10-02", "compacted") in rows and metadata_files(table) == 5


def test_iceberg_only_options_on_a_delta_table_are_named(con, tmp_path):
    delta = tmp_path / "delta"
    d.build_deltalake_unpartitioned(delta, small_appends=4)
    version = d.current_version(delta)
    for option in ("skip_recent_partitions := '1 day'", "latest_metadata := true", "spark_catalog := 'prod'"):
        message = error_of(con, f"SELECT * FROM lakehouse_compact('{delta}', {option})")
        name = option.split(" ")[0]
        assert f"lakehouse_compact: {name} applies to Iceberg tables only (" in message, message
        assert "this is a Delta Lake table: leave it out" in message, message
    assert d.current_version(delta) == version, "nothing was committed"
    # The scalar form (one template, many tables) runs and warns.
    (summary,) = con.execute(
        f"""SELECT lakehouse_compact('{delta}', '{{"skip_recent_partitions": "1 day", "dry_run": true}}')""").fetchone()
    summary = json.loads(summary)
    assert summary["error"] is None and summary["warning"].startswith(
        "ignored on this Delta Lake table: skip_recent_partitions applies to Iceberg tables only"), summary
    # The gate (the webhook server runs it with one template for every table) runs and warns.
    rows = con.execute(
        f"SELECT status, warnings FROM lakehouse_gate('{delta}', retain_last := 3, clean_expired_metadata := true, "
        "dry_run := true)").fetchall()
    assert {r[0] for r in rows} == {"dry run"}
    (warnings,) = {r[1] for r in rows}
    assert "retain_last applies to Iceberg tables only (Delta's VACUUM keeps files by age alone)" in warnings
    assert "clean_expired_metadata applies to Iceberg tables only" in warnings
    assert d.current_version(delta) == version


def test_an_iceberg_table_takes_them_without_a_word(con, tmp_path):
    table = demo(con, tmp_path / "t")
    rows = con.execute(
        f"SELECT verdict, warning FROM lakehouse_compact('{table}', {SMALL}, skip_recent_partitions := 'none', "
        "latest_metadata := true, dry_run := true)").fetchall()
    assert {r[0] for r in rows} == {"would compact", "healthy"} and {r[1] for r in rows} == {None}
    rows = con.execute(
        f"SELECT warnings FROM lakehouse_gate('{table}', {SMALL}, retain_last := 3, dry_run := true)").fetchall()
    assert {r[0] for r in rows} == {None}
