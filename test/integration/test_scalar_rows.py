"""The scalar forms over many rows (issue 49, items 5 and 6).

`lakehouse_compact(t [, options])` and `lakehouse_expire_snapshots(t [, options])` over a list of
tables: a row that fails (not a table, bad options, a Delta table for the expiry) is an error in
that row's JSON, the rows after it still run and the rows before it keep their results; a NULL
table or options gives NULL and runs nothing. `lakehouse_notify_slack(message)` posts to
`$SLACK_WEBHOOK_URL` (DuckDB skips a call whose argument is a literal NULL, so the two-argument
form cannot fall back for `NULL`), checked against a real HTTP server on loopback.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

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
    (outcome,) = con.execute("SELECT lakehouse_notify_slack(u, 'from a column') FROM (VALUES (NULL::VARCHAR)) v(u)").fetchone()
    assert json.loads(outcome)["ok"] is True and slack.requests[-1]["body"] == {"text": "from a column"}
    assert con.execute("SELECT lakehouse_notify_slack(NULL, 'skipped')").fetchone() == (None,)
    assert con.execute("SELECT lakehouse_notify_slack(NULL::VARCHAR)").fetchone() == (None,)
    assert len(slack.requests) == 2
    monkeypatch.delenv("SLACK_WEBHOOK_URL")
    with pytest.raises(Exception) as raised:
        con.execute("SELECT lakehouse_notify_slack('nowhere to go')").fetchone()
    assert "lakehouse_notify_slack: no webhook URL: pass one or set SLACK_WEBHOOK_URL" in str(raised.value)
    assert SECRET not in str(raised.value) and SECRET not in outcome
