"""lakehouse_gate and lakehouse_notify_slack, end to end, with a real HTTP server on loopback
standing in for Slack (it records every request and answers as each test scripts it).

Tables are built by pyiceberg; after the gate their rows must read back identically through
pyiceberg and DuckDB's iceberg extension. The webhook URL carries a secret token that must never
appear in a row, an error or a card.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

import conftest as c
from test_compact_iceberg import duckdb_rows, files_by_partition, pyiceberg_rows

SECRET = "T0SECRET/B0SECRET/xoxb-never-shown-4242"


class FakeSlack:
    """A loopback HTTP server: answers with the scripted statuses in order (then `default`)."""

    def __init__(self) -> None:
        self.requests: list[dict] = []
        self.script: list[tuple[int, dict]] = []
        self.default = (200, {})
        slack = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's naming
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                slack.requests.append({"path": self.path, "body": json.loads(body), "at": time.monotonic(),
                                       "content_type": self.headers.get("Content-Type")})
                status, headers = slack.script.pop(0) if slack.script else slack.default
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/services/{SECRET}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def slack():
    server = FakeSlack()
    yield server
    server.close()


def sql_value(v) -> str:
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, str):
        return "'" + v.replace("'", "''") + "'"
    return repr(v)


def gate(con, table: str, **params) -> list[dict]:
    args = "".join(f", {k} := {sql_value(v)}" for k, v in params.items())
    cur = con.execute(f"SELECT * FROM lakehouse_gate('{table}'{args})")
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r)) for r in cur.fetchall()]


def no_secret(rows) -> None:
    assert SECRET not in json.dumps(rows, default=str)


def test_gate_compacts_only_degraded_partitions_and_posts_one_card(con, iceberg_con, catalog, slack):
    table = c.build_identity_date(catalog)
    before = pyiceberg_rows(table)
    files_before = files_by_partition(table)
    rows = gate(con, f"{c.NAMESPACE}.by_date", catalog_uri=catalog.test_uri, small_file_threshold_mb=1.0,
                target_file_size_mb=8.0, slack_webhook_url=slack.url)
    no_secret(rows)
    by_partition = {r["partition"]: r for r in rows}
    assert {p: r["verdict"] for p, r in by_partition.items()} == {
        "partition_date=2026-10-01": "compacted",
        "partition_date=2026-10-02": "compacted",
        "partition_date=2026-10-03": "healthy",  # one small file: nothing to merge
    }
    assert len({r["execution_id"] for r in rows}) == 1
    first = rows[0]
    assert first["status"] == "maintained" and first["notification"] == "sent"
    assert first["partitions_compacted"] == 2 and first["partitions_total"] == 3
    compacted = [r for r in rows if r["verdict"] == "compacted"]
    assert first["small_files_eliminated"] == sum(r["small_files_before"] - r["small_files_after"] for r in compacted)
    # Six small appends per day become one file each (still under the 1 MiB threshold): 5 + 5.
    assert first["small_files_eliminated"] == 10
    assert all(r["files_after"] == 1 for r in compacted)
    # A measured speedup from real scans before and after (the projected figure beside it).
    assert first["scan_before_ms"] > 0 and first["scan_after_ms"] > 0 and first["measured_speedup"] > 0
    assert 1 < first["projected_speedup_low"] <= first["projected_speedup_high"]

    table = catalog.load_table(f"{c.NAMESPACE}.by_date")
    assert pyiceberg_rows(table) == before
    assert duckdb_rows(iceberg_con, table.metadata_location) == before
    files_after = files_by_partition(table)
    untouched = [k for k in files_before if "2026, 10, 3" in k or "20729" in k]
    assert untouched and all(files_after[k] == files_before[k] for k in untouched)

    # Exactly one card, with the run's figures, Block Kit plus a text fallback.
    assert len(slack.requests) == 1
    req = slack.requests[0]
    assert req["path"] == f"/services/{SECRET}" and req["content_type"] == "application/json"
    card = req["body"]
    text = card["text"]
    assert f"`{c.NAMESPACE}.by_date`" in text
    assert "Partitions Compacted:* 2 of 3" in text
    assert "Small Files Eliminated:* 10 (< 1 MiB)" in text
    assert "measured" in text and first["execution_id"] in text
    assert card["blocks"][0]["type"] == "header" and len(card["blocks"]) <= 50
    assert SECRET not in json.dumps(card)


def test_dry_run_changes_nothing_and_posts_nothing(con, catalog, slack):
    table = c.build_identity_date(catalog)
    root = Path(c.local_path(table.location()))
    listing = sorted(str(p) for p in root.rglob("*"))
    rows = gate(con, f"{c.NAMESPACE}.by_date", catalog_uri=catalog.test_uri, small_file_threshold_mb=1.0,
                target_file_size_mb=8.0, slack_webhook_url=slack.url, dry_run=True)
    assert {r["verdict"] for r in rows} == {"would compact", "healthy"}
    assert all(r["dry_run"] and r["status"] == "dry run" and r["notification"] == "not sent: dry run" for r in rows)
    assert rows[0]["partitions_compacted"] == 2 and rows[0]["compaction_snapshot_id"] is None
    assert sorted(str(p) for p in root.rglob("*")) == listing
    assert catalog.load_table(f"{c.NAMESPACE}.by_date").metadata_location == table.metadata_location
    assert slack.requests == []


def test_optimal_table_is_left_alone_and_posts_only_when_asked(con, catalog, slack):
    table = c.build_identity_date(catalog)
    location = table.metadata_location
    params = dict(catalog_uri=catalog.test_uri, small_file_threshold_mb=0.0001, slack_webhook_url=slack.url)
    rows = gate(con, f"{c.NAMESPACE}.by_date", **params)
    assert {r["verdict"] for r in rows} == {"healthy"} and rows[0]["status"] == "optimal"
    assert rows[0]["notification"].startswith("not sent: table is optimal")
    assert slack.requests == []
    rows = gate(con, f"{c.NAMESPACE}.by_date", notify_when_healthy=True, **params)
    assert rows[0]["notification"] == "sent"
    (req,) = slack.requests
    assert "is optimal (Average Fragmentation: 0.0000)" in req["body"]["text"]
    assert catalog.load_table(f"{c.NAMESPACE}.by_date").metadata_location == location, "nothing committed"


def query(con, sql: str) -> list[dict]:
    cur = con.execute(sql)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r)) for r in cur.fetchall()]


def test_the_profile_after_a_gate_finds_nothing_to_merge_and_the_gate_agrees(con, catalog):
    """Issue 49, item 1: after a gate at the 64 MiB default each partition of a small table holds
    one small file; that is not fragmentation (nothing is left to merge), so the profile, the
    summary and a second gate all say the table needs nothing."""
    c.build_identity_date(catalog)
    name = f"{c.NAMESPACE}.by_date"
    uri = f"catalog_uri := '{catalog.test_uri}'"
    first = gate(con, name, catalog_uri=catalog.test_uri)
    assert {r["partition"]: r["verdict"] for r in first} == {
        "partition_date=2026-10-01": "compacted",
        "partition_date=2026-10-02": "compacted",
        "partition_date=2026-10-03": "healthy",
    }
    # pyiceberg's file list: one data file per partition, each under 64 MiB.
    files = catalog.load_table(name).inspect.files().to_pylist()
    per_partition: dict[str, list[int]] = {}
    for f in files:
        per_partition.setdefault(repr(f["partition"]), []).append(f["file_size_in_bytes"])
    assert sorted(len(v) for v in per_partition.values()) == [1, 1, 1]
    assert all(size < 64 * 1024 * 1024 for sizes in per_partition.values() for size in sizes)

    nothing = "healthy: nothing to merge, 1 small file < min_input_files 2"
    profile = query(con, f"SELECT * FROM lakehouse_fragmentation('{name}', {uri})")
    assert [(r["small_files"], r["fragmentation_ratio"]) for r in profile] == [(1, 1.0)] * 3
    assert [(r["requires_compaction"], r["reason"]) for r in profile] == [(False, nothing)] * 3
    (summary,) = query(con, f"SELECT * FROM lakehouse_fragmentation_summary('{name}', {uri})")
    assert (summary["fragmented_partition_count"], summary["compactable_bytes"]) == (0, 0)
    assert summary["total_small_files"] == 3

    second = gate(con, name, catalog_uri=catalog.test_uri)
    assert {r["status"] for r in second} == {"optimal"}
    assert [(r["verdict"], r["reason"]) for r in second] == [("healthy", nothing)] * 3
    assert second[0]["partitions_degraded"] == 0 and second[0]["compaction_snapshot_id"] is None
    # The gate's histograms carry the profile's legend (item 10).
    assert {r["file_size_buckets"] for r in first + second} == {r["file_size_buckets"] for r in profile} \
        == {"<1,<4,<16,<64|<128,<256,>=256 MiB"}


def test_429_is_retried_honouring_retry_after(con, slack):
    slack.script = [(429, {"Retry-After": "1"}), (200, {})]
    started = time.monotonic()
    (outcome,) = con.execute("SELECT lakehouse_notify_slack(?, 'hello from lakehouse')", [slack.url]).fetchone()
    outcome = json.loads(outcome)
    assert outcome == {"ok": True, "status": 200, "attempts": 2, "error": None}
    assert len(slack.requests) == 2 and slack.requests[1]["at"] - slack.requests[0]["at"] >= 0.95
    assert time.monotonic() - started < 10
    assert slack.requests[0]["body"] == {"text": "hello from lakehouse"}
    blocks = json.dumps({"blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": "*hi*"}}]})
    con.execute("SELECT lakehouse_notify_slack(?, ?)", [slack.url, blocks]).fetchone()
    assert slack.requests[-1]["body"] == json.loads(blocks)


def test_500_forever_is_a_reported_failure_that_does_not_undo_maintenance(con, iceberg_con, catalog, slack):
    slack.default = (500, {})
    (outcome,) = con.execute("SELECT lakehouse_notify_slack(?, 'x')", [slack.url]).fetchone()
    outcome = json.loads(outcome)
    assert outcome["ok"] is False and outcome["status"] == 500 and outcome["attempts"] == 4
    assert SECRET not in json.dumps(outcome)
    slack.requests.clear()

    table = c.build_identity_date(catalog)
    before = pyiceberg_rows(table)
    params = dict(catalog_uri=catalog.test_uri, small_file_threshold_mb=1.0, target_file_size_mb=8.0,
                  slack_webhook_url=slack.url, notify_max_attempts=2)
    rows = gate(con, f"{c.NAMESPACE}.by_date", **params)
    assert rows[0]["notification"].startswith("failed after 2 attempts: HTTP 500"), rows[0]["notification"]
    assert len(slack.requests) == 2
    assert rows[0]["compaction_snapshot_id"] is not None, "maintenance stands"
    no_secret(rows)
    # Asked to, the gate raises — after maintenance, which is not undone.
    table = c.build_unpartitioned(catalog)
    with pytest.raises(Exception) as raised:
        gate(con, f"{c.NAMESPACE}.unpartitioned", fail_on_notify_error=True, **params)
    message = str(raised.value)
    assert "lakehouse_gate:" in message and "Slack card was not delivered" in message and SECRET not in message
    table = catalog.load_table(f"{c.NAMESPACE}.unpartitioned")
    assert table.metadata.current_snapshot().summary.operation.value == "replace"
    assert pyiceberg_rows(catalog.load_table(f"{c.NAMESPACE}.by_date")) == before


def test_corrupt_table_posts_the_failure_alert_and_raises(con, slack, tmp_path):
    metadata = tmp_path / "broken" / "metadata"
    metadata.mkdir(parents=True)
    shutil.copy(c.REPO_ROOT / "test/data/invalid_metadata/corrupt.metadata.json", metadata / "v1.metadata.json")
    (metadata / "version-hint.text").write_text("1")
    with pytest.raises(Exception) as raised:
        gate(con, str(tmp_path / "broken"), slack_webhook_url=slack.url)
    message = str(raised.value)
    assert "lakehouse_gate:" in message and "is not valid Iceberg table metadata" in message
    assert "the failure alert was posted" in message and SECRET not in message
    (alert,) = slack.requests
    execution_id = message.split("[execution ")[1].rstrip("]").strip()
    assert alert["body"]["text"] == (
        f"🚨 Iceberg Lakehouse Maintenance failed on execution {execution_id} for table {tmp_path / 'broken'}.")
    assert SECRET not in json.dumps(alert["body"])


def test_unreachable_webhook_is_reported_without_the_url(con, catalog):
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    url = f"http://127.0.0.1:{port}/services/{SECRET}"
    c.build_identity_date(catalog)
    rows = gate(con, f"{c.NAMESPACE}.by_date", catalog_uri=catalog.test_uri, small_file_threshold_mb=1.0,
                target_file_size_mb=8.0, slack_webhook_url=url, notify_max_attempts=2)
    assert rows[0]["notification"].startswith("failed after 2 attempts: cannot connect"), rows[0]["notification"]
    no_secret(rows)
    (outcome,) = con.execute("SELECT lakehouse_notify_slack(?, 'x')", [url]).fetchone()
    assert '"ok":false' in outcome and SECRET not in outcome
    for bad in ("not a url " + SECRET, "ftp://host/" + SECRET):
        with pytest.raises(Exception) as raised:
            con.execute("SELECT lakehouse_notify_slack(?, 'x')", [bad]).fetchone()
        assert "lakehouse_notify_slack:" in str(raised.value) and SECRET not in str(raised.value)
        with pytest.raises(Exception) as raised:
            gate(con, f"{c.NAMESPACE}.by_date", catalog_uri=catalog.test_uri, slack_webhook_url=bad)
        assert "lakehouse_gate: slack_webhook_url" in str(raised.value) and SECRET not in str(raised.value)


def test_webhook_from_environment_and_history_table(con, catalog, slack, monkeypatch):
    monkeypatch.setenv("SLACK_WEBHOOK_URL", slack.url)
    c.build_identity_date(catalog)
    params = dict(catalog_uri=catalog.test_uri, small_file_threshold_mb=1.0, target_file_size_mb=8.0,
                  history_table="lakehouse_runs")
    first = gate(con, f"{c.NAMESPACE}.by_date", **params)
    second = gate(con, f"{c.NAMESPACE}.by_date", notify_when_healthy=True, **params)
    assert first[0]["notification"] == "sent" and second[0]["status"] == "optimal"
    assert len(slack.requests) == 2
    history = con.execute(
        "SELECT execution_id, status, count(*) FROM lakehouse_runs GROUP BY ALL ORDER BY min(started_at)").fetchall()
    assert history == [(first[0]["execution_id"], "maintained", 3), (second[0]["execution_id"], "optimal", 3)]
    trend = con.execute("SELECT sum(small_files_before - small_files_after) FILTER (WHERE verdict = 'compacted'), "
                        "max(small_files_eliminated) FROM lakehouse_runs").fetchone()
    assert trend == (10, 10)
    assert SECRET not in json.dumps(con.execute("SELECT * FROM lakehouse_runs").fetchall(), default=str)


@pytest.mark.parametrize("builder", ["build_day_bucket", "build_evolved_spec", "build_unpartitioned"])
def test_gate_end_to_end_keeps_rows(con, iceberg_con, catalog, builder):
    table = getattr(c, builder)(catalog)
    name = table.name()[-1]
    before = pyiceberg_rows(table)
    rows = gate(con, f"{c.NAMESPACE}.{name}", catalog_uri=catalog.test_uri, small_file_threshold_mb=1.0,
                target_file_size_mb=8.0, snapshot_retention_days=0)
    assert rows[0]["status"] == "maintained" and rows[0]["partitions_compacted"] >= 1
    assert rows[0]["snapshots_expired"] >= 1
    table = catalog.load_table(f"{c.NAMESPACE}.{name}")
    assert len(table.metadata.snapshots) == 1
    assert pyiceberg_rows(table) == before
    assert duckdb_rows(iceberg_con, table.metadata_location) == before
    for path in (r["file_path"] for r in table.inspect.files().to_pylist()):
        assert os.path.exists(c.local_path(path))


def test_expiry_failure_after_compaction_says_what_stands(con, iceberg_con, catalog, slack):
    table = c.build_identity_date(catalog)
    before = pyiceberg_rows(table)
    with table.transaction() as tx:
        tx.set_properties({"gc.enabled": "false"})
    with pytest.raises(Exception) as raised:
        gate(con, f"{c.NAMESPACE}.by_date", catalog_uri=catalog.test_uri, small_file_threshold_mb=1.0,
             target_file_size_mb=8.0, snapshot_retention_days=0, slack_webhook_url=slack.url)
    message = str(raised.value)
    assert "snapshot expiry failed after the compaction committed snapshot" in message and "gc.enabled" in message
    (alert,) = slack.requests
    assert "Maintenance failed on execution" in alert["body"]["text"]
    table = catalog.load_table(f"{c.NAMESPACE}.by_date")
    assert table.metadata.current_snapshot().summary.operation.value == "replace"
    assert pyiceberg_rows(table) == before == duckdb_rows(iceberg_con, table.metadata_location)
