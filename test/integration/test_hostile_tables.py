"""Tables written by someone hostile or careless (issue 48): whoever writes a table controls its
metadata — every path in its manifests and Delta log, its `location`, its properties, its
compressed bytes — and must not be able to make a maintainer's run read, write or delete outside
the table, or exhaust the host. Each test builds such a table by hand (pyiceberg or deltalake,
then a manifest entry, a Delta log line or the metadata JSON edited, or a bomb written) and runs
the real extension on it; the bombs run the DuckDB CLI in its own process, so that a crash fails
the test instead of ending pytest.

Sections (one per item of the issue; helpers are prefixed by their section):

* reads (item 2): a manifest path with glob characters, a `~`, or an `http://` URL behind a local
  first file is read as one literal file or refused, never expanded or fetched;
* writes (item 3): a Delta add path `../elsewhere/…`, an Iceberg `location` or `write.data.path`
  outside the table do not move the compaction's output out of the table root;
* bombs (item 5): metadata whose compressed blocks inflate without end is refused by name.

Deletes (item 1) are in test_hostile_deletes.py.
"""

from __future__ import annotations

import gzip
import http.server
import json
import resource
import subprocess
import threading
import time
import zlib
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import write_deltalake
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.schema import Schema
from pyiceberg.typedef import Record
from pyiceberg.types import LongType, NestedField, StringType

import conftest as c


# --------------------------------------------------------------------------- decompression bombs
#
# A manifest, a manifest list or a gzip-compressed metadata.json of a few hundred KiB whose blocks
# inflate to GiBs. Before the fix, the manifest's zstd blocks inflated without a bound and the
# allocation that failed aborted the process ("memory allocation of … bytes failed"): no error
# handling catches that. Now every inflate stops at 100 times the file's size (at least 64 MiB)
# and the run fails with an error naming the file. The CLI runs with its address space limited
# (so the old build aborts quickly instead of taking the machine's memory); the fixed build needs
# far less.

_BOMB_ADDRESS_SPACE_BYTES = 2 << 30
_BOMB_RLE_BLOCKS = 65_536  # 128 KiB each: 8 GiB from 256 KiB


def _bomb_cli(sql: str, timeout: float = 120) -> subprocess.CompletedProcess:
    import duckdb_cli

    duckdb = str(Path(duckdb_cli.__file__).parent / "duckdb")
    ext = c.lakehouse_extension_path()
    if not ext.is_file():
        pytest.skip("extension not built")

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (_BOMB_ADDRESS_SPACE_BYTES, _BOMB_ADDRESS_SPACE_BYTES))

    return subprocess.run([duckdb, "-unsigned", "-csv", "-c", f"LOAD '{ext}'; {sql}"], capture_output=True,
                          text=True, timeout=timeout, preexec_fn=limit)


def _bomb_zstd(rle_blocks: int = _BOMB_RLE_BLOCKS) -> bytes:
    """A zstd frame of run-length blocks of 128 KiB each, 4 bytes apiece (32,768 : 1)."""
    out = bytearray(b"\x28\xb5\x2f\xfd")
    out += bytes([0x00, 7 << 3])  # no content size, no checksum; a 128 KiB window
    for i in range(rle_blocks):
        header = (1 if i + 1 == rle_blocks else 0) | (1 << 1) | ((128 * 1024) << 3)
        out += header.to_bytes(4, "little")[:3] + b"\x00"
    return bytes(out)


def _bomb_long(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return (value >> 1) ^ -(value & 1), pos


def _bomb_write_long(value: int) -> bytes:
    n = (value << 1) ^ (value >> 63)
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _bomb_avro(path: Path) -> int:
    """Rewrites the Avro container at `path` in place: its header (schema and all) kept, codec
    `zstandard`, and one block of one record whose zstd data inflates to 8 GiB. Returns the new
    size."""
    data = path.read_bytes()
    assert data[:4] == b"Obj\x01"
    pos, meta = 4, {}
    while True:
        count, pos = _bomb_long(data, pos)
        if count == 0:
            break
        if count < 0:
            _, pos = _bomb_long(data, pos)
            count = -count
        for _ in range(count):
            n, pos = _bomb_long(data, pos)
            key = data[pos:pos + n].decode()
            pos += n
            n, pos = _bomb_long(data, pos)
            meta[key] = data[pos:pos + n]
            pos += n
    sync = data[pos:pos + 16]
    meta["avro.codec"] = b"zstandard"
    out = bytearray(b"Obj\x01") + _bomb_write_long(len(meta))
    for key, value in meta.items():
        out += _bomb_write_long(len(key)) + key.encode() + _bomb_write_long(len(value)) + value
    bomb = _bomb_zstd()
    out += _bomb_write_long(0) + sync + _bomb_write_long(1) + _bomb_write_long(len(bomb)) + bomb + sync
    path.write_bytes(bytes(out))
    return len(out)


def _bomb_table(con, tmp_path: Path) -> tuple[Path, dict]:
    """A demo table (by our extension) and its current metadata."""
    table = tmp_path / "events"
    con.execute(f"SELECT * FROM lakehouse_demo('{table}')").fetchall()
    metadata = max((table / "metadata").glob("v*.metadata.json"), key=lambda p: int(p.name[1:].split(".")[0]))
    return table, json.loads(metadata.read_text())


def _bomb_refused(run: subprocess.CompletedProcess, elapsed: float, file: Path) -> None:
    assert run.returncode >= 0, f"the CLI was killed (signal {-run.returncode}): {run.stderr[-2000:]}"
    assert run.returncode != 0, "the bomb was read"
    assert str(file) in run.stderr and "refused as a decompression bomb" in run.stderr, run.stderr[-2000:]
    assert elapsed < 60, elapsed


def test_bomb_manifest_is_refused_naming_it(con, tmp_path):
    from pyiceberg.table import StaticTable

    table, _ = _bomb_table(con, tmp_path)
    metadata_file = max((table / "metadata").glob("v*.metadata.json"), key=lambda p: int(p.name[1:].split(".")[0]))
    static = StaticTable.from_metadata(str(metadata_file))
    victim = Path(c.local_path(static.current_snapshot().manifests(static.io)[0].manifest_path))
    assert _bomb_avro(victim) < 300 * 1024
    started = time.monotonic()
    run = _bomb_cli(f"SELECT * FROM lakehouse_fragmentation('{table}')")
    _bomb_refused(run, time.monotonic() - started, victim)


def test_bomb_manifest_list_is_refused_naming_it(con, tmp_path):
    table, metadata = _bomb_table(con, tmp_path)
    current = next(s for s in metadata["snapshots"] if s["snapshot-id"] == metadata["current-snapshot-id"])
    victim = Path(c.local_path(current["manifest-list"]))
    _bomb_avro(victim)
    started = time.monotonic()
    run = _bomb_cli(f"SELECT * FROM lakehouse_fragmentation('{table}')")
    _bomb_refused(run, time.monotonic() - started, victim)


def test_bomb_gzip_metadata_is_refused_naming_it(con, tmp_path):
    table, metadata = _bomb_table(con, tmp_path)
    # 1 GiB of spaces then the real metadata: valid JSON once inflated, in 1 MiB of gzip.
    victim = table / "metadata" / "v99.gz.metadata.json"
    deflate = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = b" " * (16 << 20)
    parts = [deflate.compress(chunk) for _ in range(64)]
    parts += [deflate.compress(json.dumps(metadata).encode()), deflate.flush()]
    victim.write_bytes(b"".join(parts))
    assert victim.stat().st_size < 2 << 20
    started = time.monotonic()
    run = _bomb_cli(f"SELECT * FROM lakehouse_fragmentation('{victim}')")
    _bomb_refused(run, time.monotonic() - started, victim)


def test_bomb_limits_leave_real_compressed_metadata_alone(con, tmp_path):
    """A gzip-compressed metadata file and zstd-compressed manifests that inflate well (but as real
    ones do) read as before."""
    table, metadata = _bomb_table(con, tmp_path)
    victim = table / "metadata" / "v99.gz.metadata.json"
    victim.write_bytes(gzip.compress(json.dumps(metadata).encode()))
    run = _bomb_cli(f"SELECT count(*) FROM lakehouse_fragmentation('{victim}')")
    assert run.returncode == 0, run.stderr

# --------------------------------------------------------------------------- reads (item 2)

_READS_SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False), NestedField(2, "name", StringType(), required=False)
)


_READS_ARROW = pa.schema(
    [
        pa.field("id", pa.int64(), metadata={"PARQUET:field_id": "1"}),
        pa.field("name", pa.string(), metadata={"PARQUET:field_id": "2"}),
    ]
)


def _reads_rows(ids: range) -> pa.Table:
    """Rows with Iceberg field ids (what any Iceberg writer puts in its files)."""
    return pa.table({"id": list(ids), "name": [f"n{i}" for i in ids]}, schema=_READS_ARROW)


def _reads_file_entry(table, path: str, rows: int, size: int) -> DataFile:
    """A manifest entry naming `path` (written or not), as a table's writer may put it there."""
    return DataFile.from_args(
        content=DataFileContent.DATA,
        file_path=path,
        file_format=FileFormat.PARQUET,
        partition=Record(),
        record_count=rows,
        file_size_in_bytes=size,
        spec_id=table.spec().spec_id,
    )


def _reads_table(catalog, name: str):
    """An unpartitioned table of three small files (ids 0–29) written by pyiceberg."""
    table = catalog.create_table(f"{c.NAMESPACE}.{name}", schema=_READS_SCHEMA)
    for i in range(3):
        table.append(_reads_rows(range(i * 10, i * 10 + 10)))
    return table


def _reads_ids(table) -> list[int]:
    return sorted(table.refresh().scan().to_arrow()["id"].to_pylist())


def _reads_compact(con, catalog, name: str) -> list[tuple]:
    return con.execute(
        f"SELECT partition, verdict FROM lakehouse_compact('{c.NAMESPACE}.{name}', catalog_uri := '{catalog.test_uri}', "
        "small_file_threshold_mb := 1, target_file_size_mb := 2)"
    ).fetchall()


def test_reads_glob_characters_name_one_literal_file(con, tmp_path):
    """A manifest entry `…/part-[12].parquet` is that one file: DuckDB's glob expansion would read
    `part-1.parquet` and `part-2.parquet` (another table's files, with as many rows) instead."""
    catalog = c.fresh_catalog(tmp_path / "catalog")
    table = _reads_table(catalog, "glob")
    victim = tmp_path / "victim"
    victim.mkdir()
    pq.write_table(_reads_rows(range(1000, 1002)), victim / "part-1.parquet")
    pq.write_table(_reads_rows(range(2000, 2003)), victim / "part-2.parquet")
    literal = victim / "part-[12].parquet"
    pq.write_table(_reads_rows(range(500, 505)), literal)
    c.commit_files(table, [_reads_file_entry(table, f"file://{literal}", 5, literal.stat().st_size)])
    before = _reads_ids(table)
    assert before == list(range(30)) + list(range(500, 505))
    rows = _reads_compact(con, catalog, "glob")
    assert [r[1] for r in rows] == ["compacted"], rows
    after = _reads_ids(table)
    assert after == before, "the compaction read other files than the manifest names"


def test_reads_tilde_is_not_the_home_directory(con, tmp_path):
    """A manifest path `~/…` is not a file of the table's store (a relative path): refused, never
    read from DuckDB's home directory."""
    catalog = c.fresh_catalog(tmp_path / "catalog")
    table = _reads_table(catalog, "tilde")
    home = tmp_path / "home"
    home.mkdir()
    pq.write_table(_reads_rows(range(7000, 7005)), home / "secret.parquet")
    con.execute(f"SET GLOBAL home_directory = '{home}'")
    c.commit_files(table, [_reads_file_entry(table, "~/secret.parquet", 5, (home / "secret.parquet").stat().st_size)])
    before_metadata = table.refresh().metadata_location
    with pytest.raises(duckdb.Error) as info:
        _reads_compact(con, catalog, "tilde")
    message = str(info.value)
    assert "lakehouse_compact: " in message, message
    assert "'~/secret.parquet'" in message and "not a file of the table" in message, message
    assert table.refresh().metadata_location == before_metadata, "nothing was committed"


class _ReadsRecorder(http.server.BaseHTTPRequestHandler):
    """Records every request it is sent, answers 404."""

    seen: list[str] = []

    def _record(self) -> None:
        type(self).seen.append(f"{self.command} {self.path}")
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_HEAD = _record

    def log_message(self, *args) -> None:  # quiet
        pass


@pytest.fixture
def _reads_http_server():
    _ReadsRecorder.seen = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _ReadsRecorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_reads_http_entry_after_a_local_one_sends_no_request(con, tmp_path, _reads_http_server):
    """Every path is checked against the table's store before anything is read, not only the first
    of a group: an `http://` entry listed after a local one is refused, and the host it names hears
    nothing (the user's session has httpfs loaded)."""
    from s3_server import httpfs_extension_path

    con.execute(f"LOAD '{httpfs_extension_path()}'")
    catalog = c.fresh_catalog(tmp_path / "catalog")
    table = catalog.create_table(f"{c.NAMESPACE}.http", schema=_READS_SCHEMA)
    local = tmp_path / "local.parquet"
    pq.write_table(_reads_rows(range(0, 10)), local)
    port = _reads_http_server.server_address[1]
    url = f"http://127.0.0.1:{port}/internal/part-0.parquet"
    c.commit_files(
        table,
        [
            _reads_file_entry(table, f"file://{local}", 10, local.stat().st_size),
            _reads_file_entry(table, url, 10, local.stat().st_size),
        ],
    )
    with pytest.raises(duckdb.Error) as info:
        _reads_compact(con, catalog, "http")
    message = str(info.value)
    assert "lakehouse_compact: " in message and url in message, message
    assert _ReadsRecorder.seen == [], f"the table's writer made us send {_ReadsRecorder.seen}"


# --------------------------------------------------------------------------- writes (item 3)


def _writes_files_under(directory: Path) -> set[str]:
    return {str(p) for p in directory.rglob("*") if p.is_file()} if directory.exists() else set()


def _writes_delta_table(path: Path) -> None:
    """Four small appends by deltalake."""
    for i in range(4):
        write_deltalake(str(path), _reads_rows(range(i * 10, i * 10 + 10)), mode="append")


def test_writes_delta_add_path_climbing_out_keeps_output_in_the_table(con, tmp_path):
    """A Delta add path `../elsewhere/…` (its file moved there) does not put the compaction's
    output in `elsewhere/`: outputs go under the table directory the user named."""
    table = tmp_path / "t"
    _writes_delta_table(table)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    log = table / "_delta_log"
    # Every add path climbs out of the table (its file moved there).
    for commit in sorted(log.glob("*.json")):
        lines = []
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            if "add" in action:
                name = action["add"]["path"]
                (table / name).rename(elsewhere / name)
                action["add"]["path"] = f"../elsewhere/{name}"
            lines.append(json.dumps(action))
        commit.write_text("\n".join(lines) + "\n")
    for crc in log.glob("*.crc"):
        crc.unlink()
    before_elsewhere = _writes_files_under(elsewhere)
    rows = con.execute(
        f"SELECT partition, verdict FROM lakehouse_compact('{table}', small_file_threshold_mb := 1, "
        "target_file_size_mb := 2)"
    ).fetchall()
    assert [r[1] for r in rows] == ["compacted"], rows
    assert _writes_files_under(elsewhere) == before_elsewhere, "the compaction wrote outside the table"
    # (deltalake reads `../` as a literal `%2E%2E` directory: the table is checked from its log.)
    latest = sorted(log.glob("*.json"))[-1]
    actions = [json.loads(line) for line in latest.read_text().splitlines()]
    added = [a["add"]["path"] for a in actions if "add" in a]
    assert added and all(".." not in p and "://" not in p and not p.startswith("/") for p in added), added
    assert all((table / p).is_file() for p in added), added
    records = sum(json.loads(a["add"]["stats"])["numRecords"] for a in actions if "add" in a)
    assert records == 40, actions


def _writes_imported_table(catalog, name: str, shared: Path, properties: dict[str, str] | None = None):
    """A table whose three small files live in `shared/`, outside its root (as `add_files` imports
    leave them): a rewrite cannot put its output beside them, so where it goes is the metadata's."""
    table = catalog.create_table(f"{c.NAMESPACE}.{name}", schema=_READS_SCHEMA, properties=properties or {})
    return _writes_imported_append(table, shared)


def _writes_edit_metadata(metadata_path: str, edit) -> None:
    document = json.loads(Path(metadata_path).read_text())
    edit(document)
    Path(metadata_path).write_text(json.dumps(document))


def _writes_compact(con, catalog, name: str) -> list[tuple]:
    return con.execute(
        f"SELECT partition, verdict, warning FROM lakehouse_compact('{c.NAMESPACE}.{name}', "
        f"catalog_uri := '{catalog.test_uri}', small_file_threshold_mb := 1, target_file_size_mb := 2)"
    ).fetchall()


def test_writes_iceberg_location_elsewhere_is_not_followed(con, tmp_path):
    """The metadata's `location` names another directory: the compaction's output goes under the
    table root (the directory holding `metadata/`, which holds the metadata file named), never
    there."""
    catalog = c.fresh_catalog(tmp_path / "catalog")
    table = _writes_imported_table(catalog, "moved", tmp_path / "shared")
    root = Path(c.local_path(table.location()))
    metadata = c.local_path(table.metadata_location)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    _writes_edit_metadata(metadata, lambda m: m.update(location=f"file://{elsewhere}"))
    rows = _writes_compact(con, catalog, "moved")
    assert [r[1] for r in rows] == ["compacted"], rows
    assert _writes_files_under(elsewhere) == set(), "the compaction wrote where the metadata's location says"
    written = _writes_files_under(root / "data")
    assert any(p.endswith("-compacted.parquet") for p in written), written


def test_writes_iceberg_data_path_outside_the_root_falls_back_with_a_warning(con, tmp_path):
    """`write.data.path` outside the table root is not followed: the output goes to
    `<root>/data`, and the row's warning says why."""
    catalog = c.fresh_catalog(tmp_path / "catalog")
    outside = tmp_path / "outside"
    table = _writes_imported_table(catalog, "data_path", tmp_path / "shared", {"write.data.path": f"file://{outside}"})
    root = Path(c.local_path(table.location()))
    rows = _writes_compact(con, catalog, "data_path")
    assert [r[1] for r in rows] == ["compacted"], rows
    assert _writes_files_under(outside) == set(), "the compaction followed write.data.path out of the table"
    written = _writes_files_under(root / "data")
    assert any(p.endswith("-compacted.parquet") for p in written), written
    warning = rows[0][2] or ""
    assert "write.data.path" in warning and str(outside) in warning, rows
    table = table.refresh()
    assert sorted(table.scan().to_arrow()["id"].to_pylist()) == list(range(30))


def test_writes_iceberg_data_path_inside_the_root_is_followed(con, tmp_path):
    """`write.data.path` under the table root is the table's own choice and is kept (no warning)."""
    catalog = c.fresh_catalog(tmp_path / "catalog")
    table = catalog.create_table(f"{c.NAMESPACE}.inner", schema=_READS_SCHEMA)
    root = Path(c.local_path(table.location()))
    inner = root / "files" / "fresh"
    with table.transaction() as tx:
        tx.set_properties({"write.data.path": f"file://{inner}"})
    table = _writes_imported_append(table, tmp_path / "shared")
    rows = _writes_compact(con, catalog, "inner")
    assert [r[1] for r in rows] == ["compacted"], rows
    assert rows[0][2] is None, rows
    assert any(p.endswith("-compacted.parquet") for p in _writes_files_under(inner))


def _writes_imported_append(table, shared: Path):
    shared.mkdir()
    entries = []
    for i in range(3):
        path = shared / f"part-{i}.parquet"
        pq.write_table(_reads_rows(range(i * 10, i * 10 + 10)), path)
        entries.append(_reads_file_entry(table, f"file://{path}", 10, path.stat().st_size))
    return c.commit_files(table, entries)
