"""The webhook server (`CALL lakehouse_serve(…)`): a real DuckDB process serving on loopback, a
real HTTP client (http.client), bounded loops, stopped by SIGTERM (or Ctrl-C) and its rows read
back. Tables are demo tables by path; pyiceberg and DuckDB's iceberg extension read the rows."""

from __future__ import annotations

import concurrent.futures
import hashlib
import hmac
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import urllib.parse
from pathlib import Path

import pytest

import conftest as c
from test_gate import SECRET, FakeSlack
from loopback import accepts, free_port

KEY = "serve-test-key-0123456789abcdef"
SIGNATURE_FUTURE_S = 5
SCALED = "small_file_threshold_mb := 0.064, target_file_size_mb := 0.128"



class Server:
    """`CALL lakehouse_serve(…)` in a child Python process with our extension loaded."""

    def __init__(self, extension: Path, tmp: Path, tables: list[str], extra: str = "", key: str | None = KEY,
                 history: str = "history_table := 'runs'") -> None:
        self.port = free_port()
        self.out = tmp / f"serve-{self.port}.json"
        listed = ", ".join(f"'{t}'" for t in tables)
        script = textwrap.dedent(f"""\
            import duckdb, json, sys
            con = duckdb.connect(config={{'allow_unsigned_extensions': 'true'}})
            con.execute("LOAD '{extension}'")
            con.execute("SET enable_progress_bar = false")
            try:
                rows = con.execute("CALL lakehouse_serve(listen := '127.0.0.1:{self.port}', tables := [{listed}], "
                                   "{history}{extra})").fetchall()
                exists = con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'runs'").fetchone()[0]
                history = con.execute("SELECT count(DISTINCT execution_id) FROM runs").fetchone()[0] if exists else 0
                json.dump({{"rows": rows, "history": history}}, open({str(self.out)!r}, "w"), default=str)
            except Exception as e:
                json.dump({{"error": str(e)}}, open({str(self.out)!r}, "w"))
            """)
        env = dict(os.environ)
        env.pop("LAKEHOUSE_WEBHOOK_KEY", None)
        if key is not None:
            env["LAKEHOUSE_WEBHOOK_KEY"] = key
        self.proc = subprocess.Popen([sys.executable, "-c", script], env=env, cwd=str(c.REPO_ROOT))

    def wait_ready(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"the server exited: {self.result()}")
            try:
                if request(self.port, "GET", "/healthz")[0] == 200:
                    self.ready_s = int(time.time())
                    return
            except OSError:
                time.sleep(0.05)
        raise AssertionError("the server did not come up")

    def wait_signable(self) -> None:
        """Until a signed request can be accepted: a server takes none timestamped before its
        start plus the 5 s a predecessor's clock skew allowance covers."""
        while int(time.time()) <= self.ready_s + SIGNATURE_FUTURE_S:
            time.sleep(0.1)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 120) -> dict:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        self.proc.wait(timeout=timeout)
        return self.result()

    def result(self) -> dict:
        return json.loads(self.out.read_text()) if self.out.exists() else {}


def request(port: int, method: str, path: str, body: bytes = b"", headers: dict | None = None,
            timeout: float = 30) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def bearer(key: str = KEY) -> dict:
    return {"Authorization": f"Bearer {key}"}


def signed(method: str, target: str, body: bytes = b"", key: str = KEY, timestamp: int | None = None) -> dict:
    """docs/webhook.md's signature: HMAC-SHA256 of "{timestamp}\\n{METHOD}\\n{target}\\n{body}"."""
    ts = str(int(time.time()) if timestamp is None else timestamp)
    message = f"{ts}\n{method}\n{target}\n".encode() + body
    mac = hmac.new(key.encode(), message, hashlib.sha256).hexdigest()
    return {"X-Lakehouse-Timestamp": ts, "X-Lakehouse-Signature": f"sha256={mac}"}


def gate_path(table: str) -> str:
    return f"/v1/tables/{urllib.parse.quote(table, safe='')}/gate"


def wait_run(port: int, execution_id: str, timeout: float = 120) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status, body = request(port, "GET", f"/v1/runs/{execution_id}", headers=bearer())
        assert status == 200, body
        run = json.loads(body)
        if run["status"] in ("succeeded", "failed", "cancelled"):
            return run
        time.sleep(0.1)
    raise AssertionError(f"run {execution_id} did not finish")


def demo(con, path: Path) -> str:
    con.execute(f"SELECT * FROM lakehouse_demo('{path}')").fetchall()
    return str(path)


def table_rows(iceberg_con, path: str) -> list[tuple]:
    return sorted(iceberg_con.execute(f"SELECT * FROM iceberg_scan('{path}')").fetchall())


@pytest.fixture
def served(con, lakehouse_extension, tmp_path):
    table = demo(con, tmp_path / "events")
    server = Server(lakehouse_extension, tmp_path, [table], extra=f", {SCALED}")
    server.wait_ready()
    yield server, table
    if server.proc.poll() is None:
        server.stop()


def test_authentication_and_request_checks(served):
    server, table = served
    port, path = server.port, gate_path(table)
    body = b'{"small_file_threshold_mb": 0.064}'
    server.wait_signable()
    unauthorized = [
        request(port, "POST", path),  # no key
        request(port, "POST", path, headers=bearer("wrong-key-0123456789abcdef")),
        request(port, "POST", path, body, {**signed("POST", path, body), "X-Lakehouse-Signature": "sha256=" + "0" * 64}),
        request(port, "POST", path, body, signed("POST", path, body, key="another-key-0123456789")),
        request(port, "POST", path, body, signed("POST", path, body, timestamp=int(time.time()) - 301)),  # stale
        request(port, "POST", path, body, signed("POST", path, body, timestamp=int(time.time()) + 301)),
        request(port, "POST", path, body + b" ", signed("POST", path, body)),  # body changed after signing
        request(port, "GET", "/v1/runs/whatever"),
    ]
    for status, answer in unauthorized:
        assert (status, json.loads(answer)) == (401, {"error": "unauthorized"})
    headers = signed("POST", path, body)
    status, answer = request(port, "POST", path, body, headers)
    assert status == 202, answer
    first = json.loads(answer)["execution_id"]
    assert request(port, "POST", path, body, headers)[0] == 401, "a replayed signature is refused"
    assert request(port, "POST", gate_path("/etc"), headers=bearer())[0] == 404
    assert request(port, "POST", gate_path("ns.other"), headers=bearer())[0] == 404
    assert request(port, "POST", path, b"x" * (64 * 1024 + 1), bearer())[0] == 413
    status, answer = request(port, "POST", path, b'{"small_file', bearer())
    assert status == 400 and b"not valid JSON" in answer
    status, answer = request(port, "POST", path, b'{"table": "/etc/passwd"}', bearer())
    assert status == 400 and b"unknown key" in answer
    status, answer = request(port, "POST", path, b'{"small_file_threshold_mb": -1}', bearer())
    assert status == 400 and b"out of range" in answer
    assert request(port, "GET", path, headers=bearer())[0] == 405
    assert request(port, "DELETE", "/healthz")[0] == 405
    assert request(port, "GET", "/v1/nothing", headers=bearer())[0] == 404
    status, answer = request(port, "GET", "/healthz")
    assert (status, answer) == (200, b"ok")
    run = wait_run(port, first)
    assert run["status"] == "succeeded" and run["scorecard"][0]["execution_id"] == first
    result = server.stop()
    assert [r[0] for r in result["rows"]] == [first] and result["history"] == 1


def test_a_signature_is_good_for_one_request_to_one_url(con, lakehouse_extension, tmp_path):
    """Issue 48: the signature covers the method and the request target, not just the body — one
    made for a table's trigger is refused for another table's, one made for `GET /v1/runs/…`
    is no trigger, and the old `timestamp.body` form is refused."""
    first, second = demo(con, tmp_path / "first"), demo(con, tmp_path / "second")
    server = Server(lakehouse_extension, tmp_path, [first, second], extra=f", {SCALED}")
    try:
        server.wait_ready()
        server.wait_signable()
        port, path = server.port, gate_path(first)
        # The old form, HMAC("{timestamp}.{body}"), signed no URL: one made for the first table
        # (or for a GET, whose body is empty too) triggered the second. Refused now.
        ts = str(int(time.time()))
        old = hmac.new(KEY.encode(), ts.encode() + b".", hashlib.sha256).hexdigest()
        old_form = {"X-Lakehouse-Timestamp": ts, "X-Lakehouse-Signature": f"sha256={old}"}
        assert request(port, "POST", gate_path(second), b"", old_form)[0] == 401, "the old form, any URL"
        headers = signed("POST", path)
        assert request(port, "POST", gate_path(second), b"", headers)[0] == 401, "another table's URL"
        get = signed("GET", "/v1/runs/whatever")
        assert request(port, "POST", path, b"", get)[0] == 401, "a GET's signature as a trigger"
        assert request(port, "GET", "/v1/runs/whatever", b"", get)[0] == 404, "the GET itself (no such run)"
        status, answer = request(port, "POST", path, b"", headers)
        assert status == 202, answer
        assert wait_run(port, json.loads(answer)["execution_id"])["status"] == "succeeded"
    finally:
        server.stop()


def test_a_signature_seen_before_a_restart_is_refused_after_it(con, lakehouse_extension, tmp_path):
    """Issue 48: the replay cache lives in memory; a restarted server accepts no signature
    timestamped before its start, so none its predecessor saw can be replayed."""
    table = demo(con, tmp_path / "events")
    path = gate_path(table)
    before = Server(lakehouse_extension, tmp_path, [table], extra=f", {SCALED}, dry_run := true")
    before.wait_ready()
    before.wait_signable()
    headers = signed("POST", path)
    assert request(before.port, "POST", path, b"", headers)[0] == 202
    assert request(before.port, "POST", path, b"", headers)[0] == 401, "a replay"
    before.stop()
    after = Server(lakehouse_extension, tmp_path, [table], extra=f", {SCALED}, dry_run := true")
    try:
        after.wait_ready()
        assert request(after.port, "POST", path, b"", headers)[0] == 401, "replayed after the restart"
        after.wait_signable()
        assert request(after.port, "POST", path, b"", headers)[0] == 401, "and still later"
        assert request(after.port, "POST", path, b"", signed("POST", path))[0] == 202
    finally:
        after.stop()


def test_idle_and_slow_connections_do_not_hold_the_server(con, lakehouse_extension, tmp_path):
    """Issue 48: four idle sockets delayed `/healthz` 9.7 s with `max_connections := 4`. Now one
    address is served at most a quarter of the slots (as many more wait, holding none, for its
    own; more are closed at once), the headers must come within 5 s and the body within 5 s more
    (408), and one request is served per connection."""
    import socket

    table = demo(con, tmp_path / "events")
    server = Server(lakehouse_extension, tmp_path, [table], extra=f", {SCALED}, max_connections := 4")
    server.wait_ready()

    def connect(source: str) -> socket.socket:
        return socket.create_connection(("127.0.0.1", server.port), timeout=15, source_address=(source, 0))

    def closed_after(sock: socket.socket, started: float) -> tuple[float, bytes]:
        try:
            answer = sock.recv(4096)
        except TimeoutError:
            answer = b"(still open)"
        return time.monotonic() - started, answer

    try:
        started = time.monotonic()
        idle = [connect("127.0.0.2") for _ in range(4)]
        time.sleep(0.3)
        asked = time.monotonic()
        assert request(server.port, "GET", "/healthz", timeout=3) == (200, b"ok")
        assert time.monotonic() - asked < 1, "an address's idle connections held every slot"
        # One served until the header timeout, one waiting for the address's slot (then served or
        # timed out), two closed at once.
        waited = [closed_after(sock, started) for sock in idle[2:]]
        assert all(t < 1 and a == b"" for t, a in waited), waited
        waited = [closed_after(sock, started) for sock in idle[:2]]
        assert all(t < 12 and b"(still open)" not in a for t, a in waited), waited
        # Headers sent, then 10 of 100 body bytes, then nothing: 408 within the body timeout.
        slow = connect("127.0.0.3")
        slow.sendall(f"POST {gate_path(table)} HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n".encode() + b"{" * 10)
        waited, answer = closed_after(slow, time.monotonic())
        assert waited < 8 and answer.startswith(b"HTTP/1.1 408"), (waited, answer)
        for sock in [*idle, slow]:
            sock.close()
    finally:
        server.stop()


def test_a_burst_of_triggers_runs_the_gate_at_most_twice_and_keeps_the_rows(served, iceberg_con):
    server, table = served
    before = table_rows(iceberg_con, table)
    with concurrent.futures.ThreadPoolExecutor(20) as pool:
        answers = list(pool.map(lambda _: request(server.port, "POST", gate_path(table), headers=bearer()),
                                range(100)))
    assert all(status == 202 for status, _ in answers), answers
    ids = {json.loads(body)["execution_id"] for _, body in answers}
    assert 1 <= len(ids) <= 2, ids
    runs = [wait_run(server.port, i) for i in ids]
    assert all(r["status"] == "succeeded" for r in runs), runs
    assert sum(r["triggers"] for r in runs) == 100
    result = server.stop()
    assert len(result["rows"]) == len(ids) and result["history"] == len(ids)
    assert table_rows(iceberg_con, table) == before
    from pyiceberg.table import StaticTable

    metadata = max(Path(table, "metadata").glob("v*.metadata.json"), key=lambda p: int(p.name[1:].split(".")[0]))
    scanned = StaticTable.from_metadata(str(metadata)).scan().to_arrow().to_pylist()
    assert sorted(tuple(r.values()) for r in scanned) == before


def test_unauthenticated_floods_are_refused_without_disturbing_a_run(served, iceberg_con):
    server, table = served
    before = table_rows(iceberg_con, table)
    rss = lambda: int(Path(f"/proc/{server.proc.pid}/status").read_text().split("VmRSS:")[1].split()[0])  # noqa: E731
    status, answer = request(server.port, "POST", gate_path(table), headers=bearer())
    execution_id = json.loads(answer)["execution_id"]

    def attack(i: int) -> tuple[int, float]:
        started = time.perf_counter()
        status, _ = request(server.port, "POST", gate_path(table), b"{}", {"Authorization": f"Bearer guess-{i}"})
        return status, time.perf_counter() - started

    # 1,000 while the run goes on (it must succeed and change nothing it should not); then, with
    # the server idle (the run's own memory would blur the figure), 1,000 to warm the server's
    # pools and allocator and 4,000 more: memory must stay flat.
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        results = list(pool.map(attack, range(1000)))
        run = wait_run(server.port, execution_id)
        assert run["status"] == "succeeded", run
        results += list(pool.map(attack, range(1000, 2000)))
        rss_warm = rss()
        results += list(pool.map(attack, range(2000, 6000)))
    assert {s for s, _ in results} == {401}
    latencies = sorted(t for _, t in results)
    p99 = latencies[int(len(latencies) * 0.99)]
    growth_kib = rss() - rss_warm
    print(f"\n6000 unauthenticated requests: p50 {latencies[len(latencies) // 2] * 1000:.1f} ms, "
          f"p99 {p99 * 1000:.1f} ms, RSS growth over the last 4000 {growth_kib} KiB")
    assert growth_kib < 8 * 1024, growth_kib
    server.stop()
    assert table_rows(iceberg_con, table) == before


def test_a_failing_run_posts_the_alert_and_the_server_goes_on(con, lakehouse_extension, tmp_path):
    slack = FakeSlack()
    broken = tmp_path / "broken" / "metadata"
    broken.mkdir(parents=True)
    shutil.copy(c.REPO_ROOT / "test/data/invalid_metadata/corrupt.metadata.json", broken / "v1.metadata.json")
    (broken / "version-hint.text").write_text("1")
    good = demo(con, tmp_path / "events")
    server = Server(lakehouse_extension, tmp_path, [str(tmp_path / "broken"), good],
                    extra=f", {SCALED}, slack_webhook_url := '{slack.url}'")
    try:
        server.wait_ready()
        failed = json.loads(request(server.port, "POST", gate_path(str(tmp_path / "broken")), headers=bearer())[1])
        run = wait_run(server.port, failed["execution_id"])
        assert run["status"] == "failed" and "not valid Iceberg table metadata" in run["error"], run
        (alert,) = slack.requests
        assert failed["execution_id"] in alert["body"]["text"] and SECRET not in json.dumps(run)
        ok = json.loads(request(server.port, "POST", gate_path(good), headers=bearer())[1])
        assert wait_run(server.port, ok["execution_id"])["status"] == "succeeded"
        assert len(slack.requests) == 2, "the good run posted its scorecard"
        result = server.stop()
        assert [r[2] for r in result["rows"]] == ["failed", "succeeded"]
    finally:
        slack.close()


def test_sigterm_during_a_run_leaves_the_table_readable(con, lakehouse_extension, iceberg_con, tmp_path, monkeypatch):
    table = demo(con, tmp_path / "events")
    before = table_rows(iceberg_con, table)
    monkeypatch.setenv("LAKEHOUSE_TEST_PAUSE_BEFORE_COMMIT_MS", "20000")
    server = Server(lakehouse_extension, tmp_path, [table], extra=f", {SCALED}")
    server.wait_ready()
    execution_id = json.loads(request(server.port, "POST", gate_path(table), headers=bearer())[1])["execution_id"]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not list(Path(table).rglob("*-compacted.parquet")):
        time.sleep(0.05)
    queued = json.loads(request(server.port, "POST", gate_path(table), headers=bearer())[1])["execution_id"]
    started = time.monotonic()
    result = server.stop(signal.SIGTERM)
    assert time.monotonic() - started < 15, "the paused commit was abandoned, not waited for"
    assert "rows" in result, result
    rows = {r[0]: r for r in result["rows"]}
    assert rows[execution_id][2] == "failed" and "interrupted" in rows[execution_id][8], rows
    assert rows[queued][2] == "cancelled"
    assert table_rows(iceberg_con, table) == before
    assert not list(Path(table).rglob("*-compacted.parquet")), "the abandoned rewrite removed its files"


def test_the_server_refuses_to_start_without_a_key_or_tables(lakehouse_extension, tmp_path):
    server = Server(lakehouse_extension, tmp_path, ["ns.t"], key=None)
    server.proc.wait(timeout=60)
    assert "lakehouse_serve: set LAKEHOUSE_WEBHOOK_KEY" in server.result()["error"]
    con = c.new_connection()
    con.execute(f"LOAD '{lakehouse_extension}'")
    with pytest.raises(Exception, match="lakehouse_serve: tables must list"):
        con.execute("CALL lakehouse_serve(listen := '127.0.0.1:0')").fetchall()
    with pytest.raises(Exception, match="lakehouse_serve: listen must be"):
        con.execute("CALL lakehouse_serve(listen := 'everywhere', tables := ['a.b'])").fetchall()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_the_shipped_script_serves_in_the_duckdb_cli_until_signalled(con, lakehouse_extension, iceberg_con, tmp_path,
                                                                    sig):
    """sql/webhook_serve.sql (what the systemd unit runs), with this table, port and build
    substituted, in the DuckDB CLI: a trigger runs the gate; SIGTERM (systemd's stop) or Ctrl-C
    ends the server, the CLI prints the run and exits 0."""
    table = demo(con, tmp_path / "events")
    before = table_rows(iceberg_con, table)
    port = free_port()
    script = (c.REPO_ROOT / "sql" / "webhook_serve.sql").read_text()
    script = (script.replace("/opt/lakehouse/lakehouse.duckdb_extension", str(lakehouse_extension))
              .replace("127.0.0.1:8787", f"127.0.0.1:{port}").replace("analytics.events_lakehouse", table)
              .replace("small_file_threshold_mb := 64", "small_file_threshold_mb := 0.064")
              .replace("target_file_size_mb := 128", "target_file_size_mb := 0.128")
              .replace("/var/lib/lakehouse/history", str(tmp_path / "history")))
    (tmp_path / "serve.sql").write_text(script)
    import duckdb_cli as cli_package

    duckdb_cli = str(Path(cli_package.__file__).parent / "duckdb")  # the binary, not the pip wrapper script
    env = {**os.environ, "LAKEHOUSE_WEBHOOK_KEY": KEY}
    env.pop("SLACK_WEBHOOK_URL", None)
    proc = subprocess.Popen([duckdb_cli, "-unsigned", "-csv", str(tmp_path / "runs.duckdb"), "-f",
                             str(tmp_path / "serve.sql")], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if request(port, "GET", "/healthz")[0] == 200:
                    break
            except OSError:
                time.sleep(0.05)
        execution_id = json.loads(request(port, "POST", gate_path(table), headers=bearer())[1])["execution_id"]
        assert wait_run(port, execution_id)["status"] == "succeeded"
    finally:
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert execution_id in out and "succeeded" in out, out
    assert f"lakehouse_serve: listening on http://127.0.0.1:{port}" in err, "the start says where it listens"
    assert table_rows(iceberg_con, table) == before
    assert len(list((tmp_path / "history").glob("*.parquet"))) == 1, "the run was recorded"


def test_stopping_the_pip_wrapper_stops_the_server(con, lakehouse_extension, tmp_path):
    """Issue 49, item 3: pip's `duckdb` is a Python wrapper running the real binary as its child;
    SIGTERM to the wrapper ended the wrapper only, and the binary went on serving, holding the
    port. The server now stops when the process that started it is gone."""
    table = demo(con, tmp_path / "events")
    port = free_port()
    (tmp_path / "serve.sql").write_text(
        f"LOAD '{lakehouse_extension}';\n"
        f"CALL lakehouse_serve(listen := '127.0.0.1:{port}', tables := ['{table}'], {SCALED});\n")
    env = {**os.environ, "LAKEHOUSE_WEBHOOK_KEY": KEY}
    wrapper = subprocess.Popen([str(Path(sys.executable).parent / "duckdb"), "-unsigned", "-csv", "-f",
                                str(tmp_path / "serve.sql")], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    binary = None
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and wrapper.poll() is None and not accepts(port):
            time.sleep(0.05)
        assert accepts(port), wrapper.poll()
        (binary,) = (int(p) for p in Path(f"/proc/{wrapper.pid}/task/{wrapper.pid}/children").read_text().split())
        assert Path(f"/proc/{binary}/exe").resolve().name == "duckdb"
        wrapper.send_signal(signal.SIGTERM)
        wrapper.wait(timeout=60)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and running(binary):
            time.sleep(0.1)
        assert not running(binary), "the binary went on serving after its wrapper was stopped"
        assert not accepts(port)
        out, err = wrapper.communicate(timeout=60)
        assert "the process that started this one" in err and "stopping" in err, err
    finally:
        if binary is not None and running(binary):
            os.kill(binary, signal.SIGKILL)


def running(pid: int) -> bool:
    """Whether `pid` exists and is no zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def test_a_trigger_the_gate_would_refuse_gets_400(served):
    """Issue 49, item 7: a target below the threshold got 202, then the run failed. The overrides
    are now checked with the server's other options, as lakehouse_gate checks its parameters."""
    server, table = served
    status, answer = request(server.port, "POST", gate_path(table), b'{"target_file_size_mb": 0.01}', bearer())
    assert status == 400, answer
    assert b"target_file_size_mb (0.01) must not be below small_file_threshold_mb (0.064)" in answer, answer
    status, answer = request(server.port, "POST", gate_path(table), b'{"small_file_threshold_mb": 1}', bearer())
    assert status == 400 and b"must not be below small_file_threshold_mb (1)" in answer, answer
    result = server.stop()
    assert result["rows"] == [], "no run was queued"


def test_a_table_that_does_not_exist_is_refused_at_start(con, lakehouse_extension, tmp_path):
    """Issue 49, item 7: `tables := […]` naming a path that does not exist started silently."""
    good = demo(con, tmp_path / "events")
    missing = str(tmp_path / "no-such-table")
    server = Server(lakehouse_extension, tmp_path, [good, missing])
    try:
        server.proc.wait(timeout=60)
    finally:
        if server.proc.poll() is None:
            server.stop()
    error = server.result()["error"]
    assert f"lakehouse_serve: tables: '{missing}' cannot be served" in error, error


def test_every_failed_run_posts_the_alert(con, lakehouse_extension, tmp_path):
    """Issue 49, item 7: a run that failed outside the gate itself (here: its history cannot be
    written) posted no alert. Now every failed run alerts, with its execution id."""
    slack = FakeSlack()
    table = demo(con, tmp_path / "events")
    server = Server(lakehouse_extension, tmp_path, [table], extra=f", {SCALED}, slack_webhook_url := '{slack.url}'",
                    history="history_table := 'no_such_schema.runs'")
    try:
        server.wait_ready()
        execution_id = json.loads(request(server.port, "POST", gate_path(table), headers=bearer())[1])["execution_id"]
        run = wait_run(server.port, execution_id)
        alerts = [r for r in slack.requests if execution_id in json.dumps(r["body"]) and "failed" in json.dumps(r["body"])]
        assert run["status"] == "failed" and alerts, (run, slack.requests)
        assert "history could not be written" in run["error"], run
        assert "the failure alert was posted" in run["error"] and SECRET not in json.dumps(run)
    finally:
        server.stop()
        slack.close()
