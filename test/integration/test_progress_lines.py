"""`progress := true`: a long call prints what it finished to stderr as it goes (DuckDB's C API
offers a table function no progress bar), in the DuckDB CLI as a user sees it; without it, the
same call prints nothing there."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

import conftest as c

SCALED = "small_file_threshold_mb := 0.064, target_file_size_mb := 0.128"


def cli(sql: str) -> subprocess.CompletedProcess:
    import duckdb_cli

    duckdb = str(Path(duckdb_cli.__file__).parent / "duckdb")
    ext = c.lakehouse_extension_path()
    if not ext.is_file():
        pytest.skip("extension not built")
    return subprocess.run([duckdb, "-unsigned", "-csv", "-c", f"LOAD '{ext}'; {sql}"], capture_output=True, text=True,
                          timeout=300)


def test_the_gate_prints_its_steps_and_groups_with_progress(tmp_path):
    path = tmp_path / "demo"
    assert cli(f"SELECT * FROM lakehouse_demo('{path}')").returncode == 0
    quiet = cli(f"SELECT count(*) FROM lakehouse_gate('{path}', {SCALED}, dry_run := true)")
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr
    run = cli(f"SELECT count(*) FROM lakehouse_gate('{path}', {SCALED}, progress := true)")
    assert run.returncode == 0, run.stderr
    lines = run.stderr.splitlines()
    assert all(line.startswith("lakehouse_gate [") for line in lines), lines
    text = "\n".join(lines)
    for want in ("profiled 4 partitions, 2 degraded", "planned: 2 partitions to compact",
                 "partition_date=2026-10-01: group 1/", "committed groups", "deleting", "files deleted",
                 "retired history: 9 snapshots expired"):
        assert want in text, f"{want!r} not in:\n{text}"


def test_progress_is_a_boolean_and_only_for_long_work(tmp_path):
    bad = cli(f"SELECT * FROM lakehouse_compact('{tmp_path}', progress := 'yes')")
    assert "lakehouse_compact: progress must be a BOOLEAN" in bad.stderr, bad.stderr
    profile = cli(f"SELECT * FROM lakehouse_fragmentation('{tmp_path}', progress := true)")
    assert profile.returncode != 0 and "progress" in profile.stderr, profile.stderr
