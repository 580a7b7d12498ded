"""Every SQL function on the DuckDB this Python has (the version matrix: `make test-versions`
runs this file in one virtual environment per DuckDB release line).

DuckDB's own iceberg extension is not on PyPI for every version, so the independent reader here
is pyiceberg: rows before and after maintenance must be the same multiset. The Slack webhook is
a loopback HTTP server that records what it is sent.
"""

from __future__ import annotations

import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import duckdb
import pytest
from pyiceberg.table import StaticTable

REPO_ROOT = Path(__file__).resolve().parents[2]
EXTENSION = Path(os.environ.get("LAKEHOUSE_EXTENSION", REPO_ROOT / "build" / "debug" / "lakehouse.duckdb_extension"))
if not EXTENSION.is_absolute():
    EXTENSION = REPO_ROOT / EXTENSION
SCALED = "small_file_threshold_mb := 0.064, target_file_size_mb := 0.128"


@pytest.fixture
def con():
    if not EXTENSION.is_file():
        pytest.skip(f"{EXTENSION} is not built")
    connection = duckdb.connect(config={"allow_unsigned_extensions": "true"})
    connection.execute(f"LOAD '{EXTENSION}'")
    yield connection
    connection.close()


@pytest.fixture
def demo(con, tmp_path) -> Path:
    path = tmp_path / "demo"
    (files,) = con.execute(f"SELECT data_files FROM lakehouse_demo('{path}')").fetchone()
    assert files == 167
    return path


def rows(metadata: Path) -> list:
    table = StaticTable.from_metadata(str(metadata)).scan().to_arrow()
    columns = sorted(table.column_names)
    return sorted(zip(*(table.column(c).to_pylist() for c in columns)), key=repr)


def newest(path: Path) -> Path:
    version = int((path / "metadata" / "version-hint.text").read_text().strip())
    return path / "metadata" / f"v{version}.metadata.json"


def test_duckdb_version_is_the_one_under_test():
    want = os.environ.get("LAKEHOUSE_EXPECT_DUCKDB")
    if want:
        assert duckdb.__version__ == want


def test_profile_and_summary(con, demo):
    profile = con.execute(
        f"SELECT partition, total_files, small_files, requires_compaction FROM lakehouse_fragmentation('{demo}', "
        "small_file_threshold_mb := 0.064) ORDER BY partition"
    ).fetchall()
    assert [p[1:] for p in profile] == [(52, 48, True), (70, 65, True), (20, 4, False), (25, 2, False)]
    (degraded,) = con.execute(
        f"SELECT fragmented_partition_count FROM lakehouse_fragmentation_summary('{demo}', {SCALED})"
    ).fetchone()
    assert degraded == 2


def test_compact_keeps_every_row(con, demo):
    before = rows(newest(demo))
    dry = con.execute(f"SELECT verdict FROM lakehouse_compact('{demo}', {SCALED}, dry_run := true)").fetchall()
    assert [v for (v,) in dry].count("would compact") == 2
    result = con.execute(f"SELECT verdict, files_after FROM lakehouse_compact('{demo}', {SCALED})").fetchall()
    assert [v for v, _ in result].count("compacted") == 2
    assert rows(newest(demo)) == before
    summary = json.loads(con.execute(
        f"SELECT lakehouse_compact('{demo}', '{{\"small_file_threshold_mb\": 0.064, \"target_file_size_mb\": 0.128}}')"
    ).fetchone()[0])
    assert summary["snapshot_id"] is None, "nothing left to compact"


def test_sorted_and_zordered_compaction_keep_every_row(con, demo):
    """Sort and z-order use DuckDB's create_sort_key and our lakehouse_zorder_key on every host."""
    key = con.execute("SELECT lakehouse_zorder_key('\\xF0'::BLOB, '\\x0F'::BLOB)").fetchone()[0]
    assert bytes(key)[:2] == b"\xaa\x55" and len(bytes(key)) == 18
    before = rows(newest(demo))
    result = con.execute(
        f"SELECT verdict, strategy FROM lakehouse_compact('{demo}', {SCALED}, sort_order := 'zorder(amount, event_id)')"
    ).fetchall()
    assert [s for v, s in result if v == "compacted"] == ["zorder(amount, event_id)"] * 2
    assert rows(newest(demo)) == before


def test_expire_and_health(con, demo):
    before = rows(newest(demo))
    health = con.execute(f"SELECT expirable_snapshots, metadata_bloated FROM lakehouse_metadata_health('{demo}')").fetchone()
    assert health[0] > 0 and health[1]
    expired = con.execute(f"SELECT count(*) FROM lakehouse_expire_snapshots('{demo}') WHERE kind = 'snapshot'").fetchone()
    assert expired == (health[0],)
    assert rows(newest(demo)) == before
    orphans = con.execute(f"SELECT count(*) FROM lakehouse_remove_orphan_files('{demo}')").fetchone()
    assert orphans == (0,)


class Recorder:
    def __init__(self) -> None:
        self.bodies: list[dict] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's naming
                recorder.bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/services/T/B/secret"


def test_gate_posts_its_scorecard_and_keeps_history(con, demo):
    slack = Recorder()
    try:
        before = rows(newest(demo))
        lines = con.execute(
            f"SELECT partition, verdict FROM lakehouse_gate('{demo}', {SCALED}, slack_webhook_url := '{slack.url}', "
            "history_table := 'runs')"
        ).fetchall()
        assert [v for _, v in lines].count("compacted") == 2
        assert rows(newest(demo)) == before
        (card,) = slack.bodies
        assert "Compaction Complete" in card["text"] and "secret" not in json.dumps(card)
        assert con.execute("SELECT count(*), min(status) FROM runs").fetchone() == (4, "maintained")
        outcome = json.loads(con.execute(f"SELECT lakehouse_notify_slack('{slack.url}', 'hello')").fetchone()[0])
        assert outcome["ok"] and slack.bodies[-1] == {"text": "hello"}
    finally:
        slack.server.shutdown()


def test_errors_are_errors_not_crashes(con, tmp_path):
    with pytest.raises(duckdb.Error, match="lakehouse_fragmentation: table path .* does not exist"):
        con.execute(f"SELECT * FROM lakehouse_fragmentation('{tmp_path}/nope')").fetchall()
    with pytest.raises(duckdb.Error, match="lakehouse_compact: "):
        con.execute("SELECT * FROM lakehouse_compact('/no/such/table')").fetchall()
    # The scalar form puts a row's failure in that row's JSON.
    (outcome,) = con.execute("SELECT lakehouse_compact('/no/such/table')").fetchone()
    assert json.loads(outcome)["error"].startswith("lakehouse_compact: table path ")


def test_session_settings_are_pinned_or_refused_by_name(con, demo):
    """A user's `SET GLOBAL preserve_insertion_order = false` and `default_order = 'DESC'` reach
    every connection of the database. Where this DuckDB can set them per session (1.4 and later)
    the extension pins them on its own connection and a sorted compaction keeps every row; where it
    cannot (1.3), a sorted compaction — which needs rows to keep its ORDER BY into the files — is
    refused naming preserve_insertion_order before anything is written, and a bin-pack runs (our
    SQL states every direction, so default_order changes nothing). The user's settings stay."""
    before = rows(newest(demo))
    con.execute("SET GLOBAL preserve_insertion_order = false")
    con.execute("SET GLOBAL default_order = 'DESC'")
    sorted_sql = f"SELECT verdict FROM lakehouse_compact('{demo}', {SCALED}, sort_order := 'event_id')"
    version = tuple(int(x) for x in duckdb.__version__.split(".")[:2])
    if version < (1, 4):
        with pytest.raises(duckdb.Error, match="the DuckDB setting preserve_insertion_order .* SET preserve_insertion_order = true"):
            con.execute(sorted_sql).fetchall()
        assert newest(demo).name == "v16.metadata.json", "nothing was committed"
        done = con.execute(f"SELECT verdict FROM lakehouse_compact('{demo}', {SCALED})").fetchall()
    else:
        done = con.execute(sorted_sql).fetchall()
    assert [v for (v,) in done].count("compacted") == 2
    assert rows(newest(demo)) == before
    assert con.execute("SELECT lower(current_setting('default_order'))").fetchone()[0] in ("desc", "descending")


# --------------------------------------------------------------------------- install by name


def _unsigned(tmp_path: Path) -> duckdb.DuckDBPyConnection:
    """A session whose extension directory is empty (so nothing but what the test installs loads
    by name) and that takes unsigned extensions, as `duckdb -unsigned` does."""
    return duckdb.connect(config={"allow_unsigned_extensions": "true",
                                  "extension_directory": str(tmp_path / "extensions")})


def test_install_from_a_local_repository_then_load_by_name(tmp_path):
    """`INSTALL lakehouse FROM '<dir>'` finds the binary in the repository layout
    scripts/extension_repository.py writes, and `LOAD lakehouse` then works by name."""
    import subprocess
    import sys

    if not EXTENSION.is_file():
        pytest.skip(f"{EXTENSION} is not built")
    repository = tmp_path / "repository"
    made = subprocess.run([sys.executable, str(REPO_ROOT / "scripts" / "extension_repository.py"), str(EXTENSION),
                           str(repository), "--duckdb", duckdb.__version__], capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    con = _unsigned(tmp_path)
    with pytest.raises(duckdb.Error):
        con.execute("LOAD lakehouse")  # not installed yet: the test would pass without INSTALL otherwise
    con.execute(f"INSTALL lakehouse FROM '{repository}'")
    con.execute("LOAD lakehouse")
    (files,) = con.execute(f"SELECT data_files FROM lakehouse_demo('{tmp_path / 'demo'}')").fetchone()
    assert files == 167
    installed = con.execute("SELECT installed, loaded, install_path FROM duckdb_extensions() "
                            "WHERE extension_name = 'lakehouse'").fetchone()
    assert installed[:2] == (True, True) and installed[2].startswith(str(tmp_path / "extensions")), installed
    con.close()
    # A new session loads it by name from where INSTALL put it.
    again = _unsigned(tmp_path)
    again.execute("LOAD lakehouse")
    assert again.execute("SELECT count(*) FROM lakehouse_fragmentation("
                         f"'{tmp_path / 'demo'}', {SCALED.split(',')[0]})").fetchone()[0] > 0
    again.close()


def test_install_of_the_file_then_load_by_name(tmp_path):
    """`make install`'s way: `INSTALL '<path to the .duckdb_extension>'`, then `LOAD lakehouse`."""
    if not EXTENSION.is_file():
        pytest.skip(f"{EXTENSION} is not built")
    con = _unsigned(tmp_path)
    con.execute(f"INSTALL '{EXTENSION}'")
    con.execute("LOAD lakehouse")
    assert con.execute("SELECT count(*) FROM duckdb_functions() WHERE function_name = 'lakehouse_gate'").fetchone()[0] >= 1
    con.close()
