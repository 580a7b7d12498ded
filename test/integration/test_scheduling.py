"""The shipped scheduling pieces, run for real: the dbt post-hook macro in a dbt-duckdb project
(`dbt run`), and the documented deployment — scripts/deploy.sh, the systemd units' commands and
the cron line under cron's environment — with the weekly job and the webhook server on one
machine at once; the run history, failed runs included."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

import conftest as c
from loopback import accepts, free_port
from test_gate import SECRET, FakeSlack

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


DEFAULT_DIRS = {"PREFIX": "/opt/lakehouse", "STATE": "/var/lib/lakehouse", "CONF": "/etc/lakehouse",
                "LOGS": "/var/log/lakehouse"}
SHIPPED_EXTENSION = "/opt/lakehouse/lakehouse.duckdb_extension"


def deploy(root: Path, extension: Path) -> dict[str, Path]:
    """scripts/deploy.sh (what `make deploy` runs) into a temporary root: the default directories
    moved under `root`, the build under test as the extension."""
    dirs = {name: root / default.lstrip("/") for name, default in DEFAULT_DIRS.items()}
    env = {**os.environ, **{k: str(v) for k, v in dirs.items()}, "EXTENSION": str(extension),
           "VENV": str(VENV_BIN.parent)}
    proc = subprocess.run([str(c.REPO_ROOT / "scripts" / "deploy.sh")], env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return dirs


def rooted(text: str, dirs: dict[str, Path]) -> str:
    """A documented command with the default directories moved as deploy moved them."""
    for name, default in DEFAULT_DIRS.items():
        text = text.replace(default, str(dirs[name]))
    return text


def unit(path: Path) -> dict[str, str]:
    """A unit file's settings (the last of each key)."""
    settings = {}
    for line in path.read_text().splitlines():
        if "=" in line and not line.lstrip().startswith(("#", ";", "[")):
            key, value = line.split("=", 1)
            settings[key.strip()] = value.strip()
    return settings


def environment_file(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if line and not line.startswith("#"))


def run_unit(path: Path, **popen) -> subprocess.Popen:
    """The unit's ExecStart, as systemd runs it: its working directory, its EnvironmentFile and a
    bare PATH."""
    settings = unit(path)
    env = {"PATH": "/usr/bin:/bin", **environment_file(Path(settings["EnvironmentFile"]))}
    return subprocess.Popen(shlex.split(settings["ExecStart"]), cwd=settings["WorkingDirectory"], env=env,
                            text=True, **popen)


def documented(block_start: str) -> str:
    """The command of docs/scheduling.md's shell blocks that starts with `block_start` (its
    following lines too while a double quote is open)."""
    text = (c.REPO_ROOT / "docs" / "scheduling.md").read_text()
    for block in re.findall(r"```sh\n(.*?)```", text, flags=re.S):
        lines = block.splitlines()
        for i, line in enumerate(lines):
            if line.startswith(block_start):
                command = [line]
                while "\n".join(command).count('"') % 2 == 1:
                    command.append(lines[i + len(command)])
                return "\n".join(command)
    raise AssertionError(f"docs/scheduling.md has no command starting with {block_start!r}")


def configure(script: Path, table: str, port: int | None = None) -> None:
    """What an operator edits in an installed script: the table, the thresholds (the demo's
    files are KiB-sized), the port."""
    text = script.read_text().replace("'analytics.events_lakehouse'", f"'{table}'")
    text = text.replace("small_file_threshold_mb := 64", "small_file_threshold_mb := 0.064")
    text = text.replace("target_file_size_mb := 128", "target_file_size_mb := 0.128")
    if port is not None:
        text = text.replace("127.0.0.1:8787", f"127.0.0.1:{port}")
    script.write_text(text)


def test_the_documented_deployment_runs_the_weekly_job_while_the_server_serves(con, lakehouse_extension, tmp_path):
    """Issue 49, items 2 and 4: the shipped units' commands and the documented cron line, on one
    machine, with the webhook server up. Before, both opened one database file: the weekly job
    failed on its lock before the gate started; the cron line failed under cron's PATH."""
    from test_serve import KEY, bearer, gate_path, request, wait_run

    served, swept = tmp_path / "served", tmp_path / "swept"
    demo_table(con, served)
    demo_table(con, swept)
    dirs = deploy(tmp_path / "root", lakehouse_extension)
    port = free_port()
    configure(dirs["PREFIX"] / "sql" / "webhook_serve.sql", str(served), port)
    configure(dirs["PREFIX"] / "sql" / "weekly_maintenance.sql", str(swept))
    slack = FakeSlack()
    dirs["CONF"].mkdir(parents=True)
    (dirs["CONF"] / "env").write_text(f"LAKEHOUSE_WEBHOOK_KEY={KEY}\nSLACK_WEBHOOK_URL={slack.url}\n")
    units = dirs["PREFIX"] / "systemd"
    server = run_unit(units / "lakehouse-webhook.service", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert Path(f"/proc/{server.pid}/exe").resolve() == (dirs["PREFIX"] / "bin" / "duckdb").resolve()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and server.poll() is None and not accepts(port):
            time.sleep(0.05)
        assert server.poll() is None, server.communicate()
        triggered = json.loads(request(port, "POST", gate_path(str(served)), headers=bearer())[1])["execution_id"]
        assert wait_run(port, triggered)["status"] == "succeeded"

        # The cron line, under cron's environment, while the server holds its port.
        cron = rooted(documented("0 2 * * 0"), dirs)
        command = cron.split(None, 5)[5]
        proc = subprocess.run(["env", "-i", "PATH=/usr/bin:/bin", "sh", "-c", command], capture_output=True,
                              text=True, timeout=600)
        log = (dirs["LOGS"] / "weekly.log").read_text()
        assert proc.returncode == 0, log + proc.stderr
        assert "compacted" in log and "maintained" in log, log
        # The weekly unit's command (the timer's job), still beside the server.
        weekly = run_unit(units / "lakehouse-weekly.service", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out, err = weekly.communicate(timeout=600)
        assert weekly.returncode == 0, out + err
        # The trend, as documented, while the server runs.
        trend = subprocess.run(["env", "-i", "PATH=/usr/bin:/bin", "sh", "-c",
                                rooted(documented("/opt/lakehouse/bin/duckdb -c"), dirs)],
                               capture_output=True, text=True, timeout=120)
        assert trend.returncode == 0 and "maintained" in trend.stdout, trend.stdout + trend.stderr
    finally:
        server.send_signal(signal.SIGTERM)
        out, err = server.communicate(timeout=120)
        slack.close()
    assert server.returncode == 0, err
    assert triggered in out and "succeeded" in out, out
    assert f"listening on http://127.0.0.1:{port}" in err, err
    history = duckdb.connect().execute(
        f"SELECT execution_id, table_name, status FROM read_parquet('{dirs['STATE']}/history/*.parquet') "
        "GROUP BY ALL ORDER BY min(started_at)").fetchall()
    assert [(t, s) for _, t, s in history] == [(str(served), "maintained"), (str(swept), "maintained"),
                                              (str(swept), "optimal")], history
    assert history[0][0] == triggered
    assert not any(p.name.startswith(".") for p in (dirs["STATE"] / "history").iterdir()), "no temporary file left"
    assert len(slack.requests) == 2, "the server's and the cron run's scorecards (the optimal run posts none)"


def test_the_shipped_units_verify_and_every_piece_loads_one_extension(lakehouse_extension, tmp_path):
    """Issue 49, item 4: `systemd-analyze verify` on the units as installed; no comment after a
    value (systemd would read it as part of the value); the weekly script, the server's script,
    the dbt macro and the docs' dbt example load the extension from the one place deploy puts
    it, and every unit runs the binary deploy puts beside it."""
    shipped = [c.REPO_ROOT / "sql" / f for f in ("weekly_maintenance.sql", "webhook_serve.sql")]
    shipped += [c.REPO_ROOT / "sql" / "dbt" / "lakehouse_gate.sql", c.REPO_ROOT / "docs" / "scheduling.md"]
    for path in shipped:
        loads = re.findall(r"LOAD '([^']*)'", path.read_text())
        assert loads and set(loads) == {SHIPPED_EXTENSION}, (path, loads)
    units = sorted((c.REPO_ROOT / "sql" / "systemd").iterdir())
    assert {u.name for u in units} == {"lakehouse-webhook.service", "lakehouse-weekly.service",
                                       "lakehouse-weekly.timer"}
    for path in units:
        for line in path.read_text().splitlines():
            if "=" in line and not line.lstrip().startswith("#"):
                assert "#" not in line.split("=", 1)[1], f"{path.name}: a comment after a value: {line}"
    for path in [u for u in units if u.suffix == ".service"]:
        assert unit(path)["ExecStart"].startswith("/opt/lakehouse/bin/duckdb -unsigned -f /opt/lakehouse/sql/")
    if not shutil.which("systemd-analyze"):
        pytest.skip("systemd-analyze is not installed (apt-get install systemd)")
    dirs = deploy(tmp_path / "root", lakehouse_extension)
    installed = sorted(str(p) for p in (dirs["PREFIX"] / "systemd").iterdir())
    proc = subprocess.run(["systemd-analyze", "verify", *installed], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and not proc.stderr.strip(), proc.stdout + proc.stderr


@pytest.mark.parametrize("sinks", ["history_table", "history_path and history_table"])
def test_a_failed_run_is_recorded_and_dry_runs_are_marked(con, lakehouse_extension, tmp_path, sinks):
    """Issue 49, item 8: a failing gate records its run (status `failed`, the error, no secret)
    in `history_table` (and `history_path`) before raising, as finished and dry runs are recorded."""
    table = str(tmp_path / "events")
    demo_table(con, Path(table))
    history = tmp_path / "history"
    slack = FakeSlack()
    record = f"history_table := 'runs', slack_webhook_url := '{slack.url}'"
    sources = ["runs"]
    if sinks != "history_table":
        record += f", history_path := '{history}'"
        sources.append(f"read_parquet('{history}/*.parquet')")
    try:
        con.execute(f"SELECT * FROM lakehouse_gate('{table}', dry_run := true, {record})").fetchall()
        missing = str(tmp_path / "missing")
        with pytest.raises(duckdb.Error, match="lakehouse_gate: .*execution") as failed:
            con.execute(f"SELECT * FROM lakehouse_gate('{missing}', {record})").fetchall()
        con.execute(f"SELECT * FROM lakehouse_gate('{table}', small_file_threshold_mb := 0.064, "
                    f"target_file_size_mb := 0.128, {record})").fetchall()
    finally:
        slack.close()
    for source in sources:
        runs = con.execute(f"SELECT table_name, status, dry_run, error FROM {source} GROUP BY ALL "
                           "ORDER BY min(started_at)").fetchall()
        assert [r[:3] for r in runs] == [(table, "dry run", True), (missing, "failed", False),
                                         (table, "maintained", False)], (source, runs)
        assert runs[1][3] and runs[1][3] in str(failed.value) and SECRET not in runs[1][3], runs[1][3]
    assert len(list(history.glob("*.parquet"))) == (3 if len(sources) == 2 else 0)
    assert any("failed" in json.dumps(r["body"]) for r in slack.requests), "the failure alert"


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
