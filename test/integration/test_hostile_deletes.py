"""A hostile or careless table cannot make maintenance delete outside itself (issue 48, item 1).

Whoever writes a table controls its metadata: its `location` and every path its manifests name.
The table's root is what the maintainer named or the catalog registered — the directory holding
the metadata directory of the metadata file we load — and nothing outside it is deleted: a
`location` outside the root deletes nothing (orphan removal refuses to list it; expiry and the
gate commit, keep every file and say why), and a file reached through a symlinked directory
inside the table is kept (its real path leaves the root). Each test fails on the code before the
fix, which compared paths with the metadata's own `location` as text.
"""

from __future__ import annotations

import datetime as dt
import os
import time
from pathlib import Path

import pytest

import conftest as c
from test_compact_iceberg import duckdb_rows, pyiceberg_rows
from test_expire_iceberg import backdate, commit_metadata_change, expire

DAY_S = 86_400


def other_teams_file(con, path: Path, age_days: float = 10.0) -> Path:
    """A Parquet file of the table's schema that belongs to somebody else, `age_days` old."""
    path.parent.mkdir(parents=True, exist_ok=True)
    con.execute(f"COPY (SELECT range::BIGINT AS id, DATE '2026-10-01' AS event_date, 'theirs' AS payload "
                f"FROM range(20)) TO '{path}' (FORMAT parquet)")
    old = time.time() - age_days * DAY_S
    os.utime(path, (old, old))
    return path


def set_location(catalog, name: str, location: Path):
    """The table's metadata names `location` as its location: a new metadata file with that one
    change, which the catalog then points at (as a writer with access to the table can do)."""
    return commit_metadata_change(catalog, name, lambda meta, _now: meta.update(location=str(location)))


def table_with_a_foreign_file_in_old_snapshots(con, catalog, name: str, foreign: Path):
    """A table one of whose old (30 days) snapshots held `foreign` (added by path, then
    overwritten): expiring those snapshots frees it."""
    table = catalog.create_table(f"{c.NAMESPACE}.{name}", schema=c._DATE_SCHEMA, partition_spec=c._DATE_SPEC)
    table.add_files([str(other_teams_file(con, foreign))])
    table = catalog.load_table(f"{c.NAMESPACE}.{name}")
    table.overwrite(c._date_rows(range(100, 105), dt.date(2026, 10, 1)))
    n = len(catalog.load_table(f"{c.NAMESPACE}.{name}").metadata.snapshots)
    return backdate(catalog, name, {i: 30 - i for i in range(n - 1)})


def test_orphan_removal_never_lists_a_location_outside_the_table_root(con, catalog, tmp_path):
    """The metadata names the directory above the catalog's warehouse as the table's location:
    the code before listed it and deleted another team's 10-day-old file as an orphan."""
    table = catalog.create_table(f"{c.NAMESPACE}.far_location", schema=c._DATE_SCHEMA, partition_spec=c._DATE_SPEC)
    table.append(c._date_rows(range(5), dt.date(2026, 10, 1)))
    theirs = other_teams_file(con, tmp_path / "team" / "report.parquet")
    set_location(catalog, "far_location", tmp_path)
    ref = f"'{c.NAMESPACE}.far_location', catalog_uri := '{catalog.test_uri}'"
    refusals = []
    for dry in ("true", "false"):
        try:
            con.execute(f"SELECT * FROM lakehouse_remove_orphan_files({ref}, older_than_days := 3, "
                        f"dry_run := {dry})").fetchall()
        except Exception as e:  # noqa: BLE001 - the refusal is the expected outcome
            refusals.append(str(e))
    assert theirs.exists(), "another team's file was deleted as an orphan"
    assert len(refusals) == 2, refusals
    for refusal in refusals:
        assert "lakehouse_remove_orphan_files: " in refusal and "not inside the table's root" in refusal, refusal
        assert "nothing was listed" in refusal, refusal


@pytest.mark.parametrize("function", ["lakehouse_expire_snapshots", "lakehouse_gate"])
def test_expiry_deletes_nothing_when_the_location_leaves_the_root(con, iceberg_con, catalog, tmp_path, function):
    """An expired snapshot names another team's file, and the metadata's location is a directory
    above both (so the textual guard passed): the code before deleted that file in
    `lakehouse_expire_snapshots` and in a plain `lakehouse_gate` with default parameters (what a
    schedule or webhook runs). Now the expiry still commits, but deletes no file and says why."""
    theirs = tmp_path / "team" / "f.parquet"
    table_with_a_foreign_file_in_old_snapshots(con, catalog, "far_expiry", theirs)
    table = set_location(catalog, "far_expiry", tmp_path)
    before = pyiceberg_rows(table)
    snapshots_before = len(table.metadata.snapshots)
    if function == "lakehouse_expire_snapshots":
        rows = expire(con, catalog, "far_expiry")
    else:
        cur = con.execute(f"SELECT * FROM lakehouse_gate('{c.NAMESPACE}.far_expiry', "
                          f"catalog_uri := '{catalog.test_uri}', measure_speedup := false)")
        names = [d[0] for d in cur.description]
        rows = [dict(zip(names, r)) for r in cur.fetchall()]
    assert theirs.exists(), "another team's file was deleted"
    if function == "lakehouse_expire_snapshots":
        files = [r for r in rows if r["path"] and r["kind"] not in ("snapshot", "ref")]
        assert files and all(r["action"] == "kept: outside the table location" for r in files), files
        assert any(r["path"].endswith("team/f.parquet") for r in files), files
        assert "not inside the table's root" in (rows[0]["warning"] or ""), rows[0]
    else:
        assert any("not inside the table's root" in str(r.get("warnings") or "") for r in rows), rows
    table = catalog.load_table(f"{c.NAMESPACE}.far_expiry")
    assert len(table.metadata.snapshots) < snapshots_before, "the expiry itself committed"
    assert pyiceberg_rows(table) == before == duckdb_rows(iceberg_con, table.metadata_location)


def test_a_symlinked_directory_inside_the_table_does_not_reach_outside(con, catalog, tmp_path):
    """The location is the table's own, but `data/shared` inside it is a symlink to another
    team's directory, and an expired snapshot names a file through it: the code before passed the
    textual check and `remove_file` followed the link. Its real path leaves the root: kept."""
    name = "linked"
    table = catalog.create_table(f"{c.NAMESPACE}.{name}", schema=c._DATE_SCHEMA, partition_spec=c._DATE_SPEC)
    root = Path(c.local_path(table.location()))
    (root / "data").mkdir(parents=True, exist_ok=True)
    team = tmp_path / "team"
    theirs = other_teams_file(con, team / "f.parquet")
    os.symlink(team, root / "data" / "shared")
    table.add_files([str(root / "data" / "shared" / "f.parquet")])
    table = catalog.load_table(f"{c.NAMESPACE}.{name}")
    table.overwrite(c._date_rows(range(100, 105), dt.date(2026, 10, 1)))
    n = len(catalog.load_table(f"{c.NAMESPACE}.{name}").metadata.snapshots)
    backdate(catalog, name, {i: 30 - i for i in range(n - 1)})
    rows = expire(con, catalog, name)
    assert theirs.exists(), "the file behind the symlink was deleted"
    (row,) = [r for r in rows if r["path"] and r["path"].endswith("shared/f.parquet")]
    assert row["action"] == "kept: its real path (symlinks resolved) leaves the table's root", row
    assert any(r["action"] == "deleted" for r in rows if r["kind"] == "manifest_list"), \
        "files really inside the table are still deleted"
