"""The shipped scheduling pieces, run for real: the dbt post-hook macro in a dbt-duckdb project
(`dbt run`), and the weekly maintenance script through the DuckDB CLI (`duckdb -unsigned -f`)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb

import conftest as c

VENV_BIN = Path(sys.executable).parent


def demo_table(con, path: Path) -> list[tuple]:
    con.execute(f"SELECT * FROM lakehouse_demo('{path}')")
    return con.execute(f"SELECT partition, total_files FROM lakehouse_fragmentation('{path}') ORDER BY 1").fetchall()


def profile(con, path: Path) -> dict[str, tuple]:
    rows = con.execute(
        f"SELECT partition, total_files, requires_compaction FROM lakehouse_fragmentation('{path}', "
        "small_file_threshold_mb := 0.064)").fetchall()
    return {p: (n, r) for p, n, r in rows}


def test_dbt_post_hook_runs_the_gate(con, iceberg_con, lakehouse_extension, tmp_path):
    table = tmp_path / "events_lakehouse"
    before_files = dict(demo_table(con, table))
    before_rows = sorted(iceberg_con.execute(f"SELECT * FROM iceberg_scan('{table}')").fetchall())
    project = tmp_path / "project"
    shutil.copytree(c.REPO_ROOT / "test" / "dbt_project", project)
    # The project names the shipped macros by a path relative to the repository.
    (project / "dbt_project.yml").write_text(
        (project / "dbt_project.yml").read_text().replace("../../sql/dbt", str(c.REPO_ROOT / "sql" / "dbt")))
    database = tmp_path / "warehouse.duckdb"
    (tmp_path / "profiles.yml").write_text(
        "lakehouse:\n  target: dev\n  outputs:\n    dev:\n      type: duckdb\n"
        f"      path: '{database}'\n      threads: 1\n"
        "      config_options:\n        allow_unsigned_extensions: true\n")
    env = dict(os.environ, LAKEHOUSE_EXTENSION=str(lakehouse_extension), LAKEHOUSE_TABLE=str(table),
               DBT_SEND_ANONYMOUS_USAGE_STATS="false")
    env.pop("SLACK_WEBHOOK_URL", None)
    proc = subprocess.run(
        [str(VENV_BIN / "dbt"), "run", "--project-dir", str(project), "--profiles-dir", str(tmp_path),
         "--target-path", str(tmp_path / "target"), "--log-path", str(tmp_path / "logs")],
        env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert "Completed successfully" in proc.stdout

    after = profile(con, table)
    assert after["partition_date=2026-10-01"][0] < before_files["partition_date=2026-10-01"]
    assert after["partition_date=2026-10-03"][0] == before_files["partition_date=2026-10-03"], "healthy untouched"
    assert not any(r for _, r in after.values())
    assert sorted(iceberg_con.execute(f"SELECT * FROM iceberg_scan('{table}')").fetchall()) == before_rows
    db = duckdb.connect(str(database), read_only=True)
    model = db.execute("SELECT count(*) FROM fragmentation_report").fetchone()
    runs = db.execute("SELECT count(DISTINCT execution_id), min(status), max(partitions_compacted) FROM lakehouse_runs").fetchone()
    db.close()
    assert model == (4,)
    assert runs == (1, "maintained", 2)


def test_weekly_maintenance_script_runs_in_the_cli(con, lakehouse_extension, tmp_path):
    table = tmp_path / "events_lakehouse"
    demo_table(con, table)
    script = (c.REPO_ROOT / "sql" / "weekly_maintenance.sql").read_text()
    assert "LOAD 'build/release/lakehouse.duckdb_extension'" in script and "'analytics.events_lakehouse'" in script
    script = script.replace("build/release/lakehouse.duckdb_extension", str(lakehouse_extension))
    script = script.replace("'analytics.events_lakehouse'", f"'{table}'")
    script = script.replace("small_file_threshold_mb := 64", "small_file_threshold_mb := 0.064")
    script = script.replace("target_file_size_mb := 128", "target_file_size_mb := 0.128")
    (tmp_path / "weekly.sql").write_text(script)
    database = tmp_path / "runs.duckdb"
    env = dict(os.environ)
    env.pop("SLACK_WEBHOOK_URL", None)
    proc = subprocess.run([str(VENV_BIN / "duckdb"), "-unsigned", str(database), "-f", str(tmp_path / "weekly.sql")],
                          env=env, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "compacted" in proc.stdout and "maintained" in proc.stdout
    after = profile(con, table)
    assert not any(r for _, r in after.values())


def test_relative_table_paths_work_and_metadata_records_absolute_ones(lakehouse_extension, tmp_path):
    """The CLI user of `make demo` names tables relative to the working directory."""
    sql = (f"LOAD '{lakehouse_extension}'; "
           "SELECT count(*) FROM lakehouse_demo('rel/events'); "
           "SELECT orphan_files, metadata_bloated FROM lakehouse_metadata_health('rel/events'); "
           "SELECT DISTINCT status FROM lakehouse_gate('rel/events', small_file_threshold_mb := 0.064, "
           "target_file_size_mb := 0.128); "
           "SELECT count(*) FROM lakehouse_remove_orphan_files('rel/events', older_than_days := 0);")
    proc = subprocess.run([str(VENV_BIN / "duckdb"), "-unsigned", "-csv", "-noheader", "-c", sql], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.split() == ["1", "0,true", "maintained", "0"], proc.stdout
    import json as _json
    hint = (tmp_path / "rel/events/metadata/version-hint.text").read_text().strip()
    meta = _json.loads((tmp_path / f"rel/events/metadata/v{hint}.metadata.json").read_text())
    assert all(Path(m["metadata-file"]).is_absolute() for m in meta["metadata-log"][-2:]), meta["metadata-log"][-2:]
