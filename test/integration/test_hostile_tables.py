"""Tables written by someone hostile or careless (issue 48): a maintainer's run stays inside the
table and inside its limits whatever the table's metadata says. Each section builds its hostile
table by hand and runs our extension in the DuckDB CLI, in its own process, so that a crash fails
the test instead of ending pytest."""

from __future__ import annotations

import gzip
import json
import resource
import subprocess
import time
import zlib
from pathlib import Path

import pytest

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
