"""The scalar forms over many rows (issue 49, items 5 and 6).

`lakehouse_compact(t [, options])` and `lakehouse_expire_snapshots(t [, options])` over a list of
tables: a row that fails (not a table, bad options, a Delta table for the expiry) is an error in
that row's JSON, the rows after it still run and the rows before it keep their results; a NULL
table or options gives NULL and runs nothing. `lakehouse_notify_slack(message)` posts to
`$SLACK_WEBHOOK_URL` (DuckDB skips a call whose argument is a literal NULL, so the two-argument
form cannot fall back for `NULL`), checked against a real HTTP server on loopback. Ctrl-C between
rows stops the query naming the rows whose commits stand.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import duckdb_cli
import pytest

import conftest as c
import delta_tables as d
from test_gate import SECRET, FakeSlack

SMALL = '{"small_file_threshold_mb": 0.064, "target_file_size_mb": 0.128}'


@pytest.fixture
def slack():
    server = FakeSlack()
    yield server
    server.close()


def demo(con, path: Path) -> str:
    con.execute(f"SELECT * FROM lakehouse_demo('{path}', snapshots := 4)").fetchall()
    return str(path)


def metadata_files(path: str) -> int:
    return len(list(Path(path, "metadata").glob("*.metadata.json")))


def by_row(con, function: str, rows: list[tuple[str | None, str | None]]) -> list[dict | None]:
    """`function(t, o)` over `rows` in order, each result parsed (None for NULL)."""
    values = ", ".join(
        f"({i}, {'NULL' if t is None else repr(t)}::VARCHAR, {'NULL' if o is None else repr(o)}::VARCHAR)"
        for i, (t, o) in enumerate(rows))
    out = con.execute(f"SELECT {function}(t, o) FROM (VALUES {values}) v(i, t, o) ORDER BY i").fetchall()
    return [None if r[0] is None else json.loads(r[0]) for r in out]


def test_a_bad_row_is_an_error_in_its_json_and_the_other_rows_commit(con, tmp_path):
    s1, s2 = demo(con, tmp_path / "s1"), demo(con, tmp_path / "s2")
    nope = str(tmp_path / "nope")
    results = by_row(con, "lakehouse_compact",
                     [(s1, SMALL), (nope, SMALL), (None, SMALL), (s2, None), (s2, '{"bogus": 1}'), (s2, SMALL)])
    first, missing, null_table, null_options, bad_options, last = results
    # s1 was compacted and committed, and its result is there.
    assert first["error"] is None and first["partitions_compacted"] == 2
    assert first["metadata_location"].endswith("/v5.metadata.json") and metadata_files(s1) == 5
    # The missing table is its row's error, naming the function and the table.
    assert missing["table"] == nope and missing["error"].startswith("lakehouse_compact: table path ")
    assert "does not exist" in missing["error"]
    # NULL in, NULL out: nothing ran for those rows (s2 is compacted once, by the last row).
    assert null_table is None and null_options is None
    assert bad_options["error"].startswith("lakehouse_compact: unknown option 'bogus'")
    assert last["error"] is None and last["metadata_location"].endswith("/v5.metadata.json")
    assert metadata_files(s2) == 5


def test_the_expiry_scalar_follows_the_same_rule(con, tmp_path):
    s1 = demo(con, tmp_path / "s1")
    delta = tmp_path / "delta"
    d.build_deltalake_unpartitioned(delta, small_appends=2)
    expire = '{"snapshot_retention_days": 0, "retain_last": 1}'
    results = by_row(con, "lakehouse_expire_snapshots",
                     [(str(delta), expire), (str(tmp_path / "nope"), expire), (s1, '{"retain_last": 0}'), (s1, expire)])
    on_delta, missing, bad, expired = results
    assert on_delta["error"].startswith("lakehouse_expire_snapshots: ") and "Delta Lake table" in on_delta["error"]
    assert "does not exist" in missing["error"]
    assert bad["error"] == "lakehouse_expire_snapshots: retain_last must be an integer of at least 1, got 0"
    assert expired["error"] is None and expired["snapshots_expired"] == 3
    assert expired["metadata_location"].endswith("/v5.metadata.json")


def test_notify_slack_with_one_argument_posts_to_the_environments_webhook(con, slack, monkeypatch):
    monkeypatch.setenv("SLACK_WEBHOOK_URL", slack.url)
    (outcome,) = con.execute("SELECT lakehouse_notify_slack('hello from the environment')").fetchone()
    assert json.loads(outcome) == {"ok": True, "status": 200, "attempts": 1, "error": None}
    assert [r["body"] for r in slack.requests] == [{"text": "hello from the environment"}]
    # A NULL URL *value* falls back too; a literal NULL is skipped by DuckDB (NULL, nothing sent).
    (outcome,) = con.execute(
        "SELECT lakehouse_notify_slack(u, 'from a column') FROM (VALUES (NULL::VARCHAR)) v(u)").fetchone()
    assert json.loads(outcome)["ok"] is True and slack.requests[-1]["body"] == {"text": "from a column"}
    assert con.execute("SELECT lakehouse_notify_slack(NULL, 'skipped')").fetchone() == (None,)
    assert con.execute("SELECT lakehouse_notify_slack(NULL::VARCHAR)").fetchone() == (None,)
    assert len(slack.requests) == 2
    monkeypatch.delenv("SLACK_WEBHOOK_URL")
    with pytest.raises(Exception) as raised:
        con.execute("SELECT lakehouse_notify_slack('nowhere to go')").fetchone()
    assert "lakehouse_notify_slack: no webhook URL: pass one or set SLACK_WEBHOOK_URL" in str(raised.value)
    assert SECRET not in str(raised.value) and SECRET not in outcome


def test_ctrl_c_between_rows_names_the_rows_that_committed(tmp_path):
    """Ctrl-C in the DuckDB CLI while the second row's compaction waits to commit (the test
    build's pause hook): the query stops, its message names the first row, whose commit stands,
    and the second table is left as it was."""
    cli = str(Path(duckdb_cli.__file__).parent / "duckdb")
    ext = c.lakehouse_extension_path()
    s1, s2 = tmp_path / "s1", tmp_path / "s2"
    setup = f"LOAD '{ext}'; " + " ".join(f"SELECT * FROM lakehouse_demo('{t}', snapshots := 4);" for t in (s1, s2))
    assert subprocess.run([cli, "-unsigned", "-c", setup], capture_output=True, timeout=120).returncode == 0
    sql = f"LOAD '{ext}'; SELECT lakehouse_compact(t, '{SMALL}') FROM (VALUES ('{s1}'), ('{s2}')) v(t);"
    env = {**os.environ, "LAKEHOUSE_TEST_PAUSE_BEFORE_COMMIT_MS": "4000"}
    proc = subprocess.Popen([cli, "-unsigned", "-c", sql], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and not list(s2.rglob("*-compacted.parquet")):
        time.sleep(0.05)
    assert metadata_files(str(s1)) == 5, "the first row committed before the second started"
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    message = out + err
    assert "lakehouse_compact: interrupted: nothing was committed" in message, message
    assert f"(table '{s2}'); the rows before it ran to the end, and what they committed stands: '{s1}'" in message
    assert metadata_files(str(s2)) == 4 and not list(s2.rglob("*-compacted.parquet")), "s2 is as it was"
