#!/usr/bin/env python3
"""Benchmark: tables on S3-compatible object storage behind an Iceberg REST catalog.

Usage::

    .venv/bin/python bench/bench_object_storage.py [--dir /tmp/lakehouse-bench-s3] [--delay-ms 5]

Servers (started here on loopback, stopped by PID; their state is kept under ``--dir`` so the
tables are built once): versitygw (S3-compatible, posix backend), Apache Iceberg's REST catalog
fixture (JDBC/sqlite, S3FileIO), and a latency proxy that adds ``--delay-ms`` to every S3 request
(the catalog's own requests are not delayed).

1. **Profile** of a table of 20,000 data files in 200 manifests (200 fast appends of 100 files,
   4 identity partitions; every file is a real Parquet object), all S3 requests through the proxy:
   ``lakehouse_fragmentation('ns.events')`` (catalog from ``.pyiceberg.yaml``), pyiceberg
   ``load_table`` + ``inspect.files()`` + a pyarrow ``group_by``, and DuckDB's iceberg extension
   (``iceberg_metadata`` on the current metadata file, httpfs secret on the proxy). Best of
   ``--repeat`` after one warm-up; all must agree on the file count.
2. **Compaction** throughput: the same fragmented table (4 partitions x 48 files of ~1 MiB) on S3
   through the REST catalog and on local disk through a sqlite SQL catalog, compacted by
   ``lakehouse_compact`` (fresh copy each run); MiB of input rewritten per second, rows verified
   with pyiceberg.

Writes ``bench/results/object_storage.md``.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime as dt
import os
import platform
import shutil
import sys
import textwrap
import time
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT / "test" / "integration"))

from rest_catalog import RestCatalogServer  # noqa: E402
from s3_server import ACCESS_KEY_ID, SECRET_ACCESS_KEY, S3Server, duckdb_secret_sql, start_latency_proxy  # noqa: E402

BUCKET = "bench"
WAREHOUSE = f"s3://{BUCKET}/warehouse"
FILES, APPENDS, DAYS = 20_000, 200, 4
COMPACT_FILES, COMPACT_ROWS = 48, 60_000  # per partition: 48 files of ~1 MiB
OUTPUT = REPO_ROOT / "bench" / "results" / "object_storage.md"


def extension_path(explicit: str | None) -> Path:
    for candidate in (explicit, os.environ.get("LAKEHOUSE_EXTENSION"), "build/release/lakehouse.duckdb_extension",
                      "build/debug/lakehouse.duckdb_extension"):
        if candidate and (REPO_ROOT / candidate).is_file():
            return (REPO_ROOT / candidate).resolve()
    raise SystemExit("no built extension: run make release")


def pip_extension(name: str) -> str:
    import importlib.util
    import glob

    spec = importlib.util.find_spec(f"duckdb_extension_{name}")
    for location in spec.submodule_search_locations:
        found = sorted(glob.glob(os.path.join(location, "extensions", "*", f"{name}.duckdb_extension")))
        if found:
            return found[-1]
    raise SystemExit(f"duckdb-extension-{name} is not installed")


def write_yaml(home: Path, uri: str, endpoint: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / ".pyiceberg.yaml").write_text(textwrap.dedent(f"""\
        default-catalog: bench
        catalog:
          bench:
            type: rest
            uri: {uri}
            s3.endpoint: {endpoint}
            s3.access-key-id: {ACCESS_KEY_ID}
            s3.secret-access-key: {SECRET_ACCESS_KEY}
            s3.region: us-east-1
            s3.path-style-access: "true"
        """))


def pyiceberg_rest(uri: str, endpoint: str):
    from pyiceberg.catalog.rest import RestCatalog

    return RestCatalog("bench", uri=uri, **{"s3.endpoint": endpoint, "s3.access-key-id": ACCESS_KEY_ID,
                                            "s3.secret-access-key": SECRET_ACCESS_KEY, "s3.region": "us-east-1",
                                            "s3.path-style-access": "true"})


def schema_and_spec():
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import DateType, DoubleType, LongType, NestedField

    schema = Schema(NestedField(1, "id", LongType(), required=False), NestedField(2, "day", DateType(), required=False),
                    NestedField(3, "amount", DoubleType(), required=False))
    spec = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="day"))
    return schema, spec


ARROW = pa.schema([("id", pa.int64()), ("day", pa.date32()), ("amount", pa.float64())])


def build_profile_table(catalog, log) -> None:
    """20,000 real Parquet objects committed in 200 fast appends (one manifest each)."""
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
    from pyiceberg.typedef import Record

    catalog.create_namespace_if_not_exists("ns")
    if catalog.table_exists("ns.events"):
        table = catalog.load_table("ns.events")
        if len(table.inspect.files()) == FILES:
            return
        catalog.purge_table("ns.events")
    schema, spec = schema_and_spec()
    table = catalog.create_table("ns.events", schema=schema, partition_spec=spec)
    io = table.io
    started = time.monotonic()

    def write(i: int) -> DataFile:
        day = dt.date(2026, 10, 1 + i % DAYS)
        rows = pa.table({"id": pa.array(range(i * 10, i * 10 + 10), pa.int64()), "day": pa.array([day] * 10, pa.date32()),
                         "amount": pa.array([i * 0.5] * 10, pa.float64())}, schema=ARROW)
        path = f"{table.location()}/data/day={day}/{i:06d}.parquet"
        with io.new_output(path).create(overwrite=True) as stream:
            pq.write_table(rows, stream)
        return DataFile.from_args(content=DataFileContent.DATA, file_path=path, file_format=FileFormat.PARQUET,
                                  partition=Record((day - dt.date(1970, 1, 1)).days), record_count=10, file_size_in_bytes=len(io.new_input(path)),
                                  spec_id=0)

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        files = list(pool.map(write, range(FILES)))
    log(f"  wrote {FILES} objects in {time.monotonic() - started:.0f}s")
    per = FILES // APPENDS
    for a in range(APPENDS):
        with table.transaction() as tx:
            with tx.update_snapshot().fast_append() as append:
                for f in files[a * per:(a + 1) * per]:
                    append.append_data_file(f)
    log(f"  committed {APPENDS} appends in {time.monotonic() - started:.0f}s")


def best_of(run, repeat: int):
    run()  # warm-up (JIT-free here, but connections and the OS page cache)
    times, result = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - t)
    return min(times), result


def profile(ext: Path, rest: RestCatalogServer, proxy, home: Path, repeat: int) -> list[tuple[str, float, int]]:
    os.environ["PYICEBERG_HOME"] = str(home)
    write_yaml(home, rest.uri, proxy.endpoint)
    metadata = pyiceberg_rest(rest.uri, proxy.endpoint).load_table("ns.events").metadata_location

    def ours() -> int:
        con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
        con.execute(f"LOAD '{ext}'")
        n = con.execute("SELECT sum(total_files) FROM lakehouse_fragmentation('ns.events')").fetchone()[0]
        con.close()
        return int(n)

    def pyiceberg() -> int:
        files = pyiceberg_rest(rest.uri, proxy.endpoint).load_table("ns.events").inspect.files()
        day = pc.struct_field(files["partition"], "day")
        grouped = pa.table({"day": day, "size": files["file_size_in_bytes"]}).group_by("day").aggregate(
            [("size", "count"), ("size", "sum")])
        return int(pc.sum(grouped["size_count"]).as_py())

    def duck() -> int:
        con = duckdb.connect()
        con.execute(f"LOAD '{pip_extension('httpfs')}'")
        con.execute(f"LOAD '{pip_extension('avro')}'")
        con.execute(f"LOAD '{pip_extension('iceberg')}'")
        con.execute(duckdb_secret_sql(proxy, f"s3://{BUCKET}/"))
        rows = con.execute(f"SELECT regexp_extract(file_path, '/([^/]+)/[^/]+$', 1) AS p, count(*) "
                           f"FROM iceberg_metadata('{metadata}') WHERE status <> 'DELETED' AND "
                           "manifest_content = 'DATA' GROUP BY p").fetchall()
        con.close()
        return sum(n for _, n in rows)

    rows = []
    for label, run in (("lakehouse_fragmentation", ours), ("pyiceberg inspect.files()", pyiceberg),
                       ("DuckDB iceberg_metadata", duck)):
        seconds, count = best_of(run, repeat)
        print(f"  {label}: {seconds:.3f}s ({count} files)", flush=True)
        rows.append((label, seconds, count))
    return rows


def fragmented_rows(day: dt.date, start: int) -> pa.Table:
    n = COMPACT_ROWS
    return pa.table({"id": pa.array(range(start, start + n), pa.int64()), "day": pa.array([day] * n, pa.date32()),
                     "amount": pa.array([float(i) for i in range(start, start + n)], pa.float64())}, schema=ARROW)


def build_compaction_table(catalog, name: str) -> float:
    """4 partitions x COMPACT_FILES appends; returns the input size in MiB."""
    schema, spec = schema_and_spec()
    catalog.create_namespace_if_not_exists("ns")
    if catalog.table_exists(f"ns.{name}"):
        catalog.purge_table(f"ns.{name}")
    table = catalog.create_table(f"ns.{name}", schema=schema, partition_spec=spec)
    start = 0
    for _ in range(COMPACT_FILES):
        batch = pa.concat_tables([fragmented_rows(dt.date(2026, 10, 1 + d), start + d * COMPACT_ROWS) for d in range(DAYS)])
        table.append(batch)
        start += DAYS * COMPACT_ROWS
    table = catalog.load_table(f"ns.{name}")
    return sum(f["file_size_in_bytes"] for f in table.inspect.files().to_pylist()) / 2**20


def compact(ext: Path, table: str, extra: str = "") -> float:
    con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
    con.execute(f"LOAD '{pip_extension('httpfs')}'")
    con.execute(f"LOAD '{ext}'")
    t = time.perf_counter()
    rows = con.execute(f"SELECT verdict FROM lakehouse_compact('{table}', small_file_threshold_mb := 64, "
                       f"target_file_size_mb := 128{extra})").fetchall()
    elapsed = time.perf_counter() - t
    con.close()
    assert [r[0] for r in rows] == ["compacted"] * DAYS, rows
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dir", default="/tmp/lakehouse-bench-s3")
    parser.add_argument("--delay-ms", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--extension")
    parser.add_argument("--output", default=str(OUTPUT))
    args = parser.parse_args(argv)
    ext = extension_path(args.extension)
    bench = Path(args.dir)
    bench.mkdir(parents=True, exist_ok=True)
    log = lambda m: print(m, flush=True)  # noqa: E731
    s3 = S3Server.start(bench / "s3")
    rest = RestCatalogServer()
    proxy = None
    try:
        if not (s3.data_dir / BUCKET).is_dir():
            s3.create_bucket(BUCKET)
        rest.start(bench / "rest", warehouse=WAREHOUSE, s3_endpoint=s3.endpoint, access_key=ACCESS_KEY_ID,
                   secret_key=SECRET_ACCESS_KEY)
        direct = pyiceberg_rest(rest.uri, s3.endpoint)
        log("profile table (built once, kept under --dir):")
        build_profile_table(direct, log)
        proxy = start_latency_proxy(s3.endpoint, args.delay_ms)
        log(f"profile through the proxy (+{args.delay_ms} ms per S3 request):")
        profile_rows = profile(ext, rest, proxy, bench / "home-proxy", args.repeat)
        counts = {c for _, _, c in profile_rows}
        assert counts == {FILES}, profile_rows

        log("compaction, S3 through the REST catalog vs local disk through a sqlite catalog:")
        write_yaml(bench / "home-direct", rest.uri, s3.endpoint)
        os.environ["PYICEBERG_HOME"] = str(bench / "home-direct")
        s3_mib = build_compaction_table(direct, "compact_s3")
        before = direct.load_table("ns.compact_s3").scan().to_arrow().sort_by("id")
        s3_seconds = compact(ext, "ns.compact_s3")
        assert direct.load_table("ns.compact_s3").scan().to_arrow().sort_by("id").equals(before)
        from pyiceberg.catalog.sql import SqlCatalog

        local_dir = bench / "local"
        shutil.rmtree(local_dir, ignore_errors=True)
        local_dir.mkdir()
        local = SqlCatalog("local", uri=f"sqlite:///{local_dir}/catalog.db", warehouse=f"file://{local_dir}")
        local_mib = build_compaction_table(local, "compact_local")
        before_local = local.load_table("ns.compact_local").scan().to_arrow().sort_by("id")
        local_seconds = compact(ext, "ns.compact_local", f", catalog := 'local', catalog_uri := 'sqlite:///{local_dir}/catalog.db'")
        assert local.load_table("ns.compact_local").scan().to_arrow().sort_by("id").equals(before_local)
        log(f"  S3: {s3_mib:.0f} MiB in {s3_seconds:.2f}s; local: {local_mib:.0f} MiB in {local_seconds:.2f}s")
    finally:
        if proxy:
            proxy.stop()
        rest.stop()
        s3.stop()

    ours = profile_rows[0][1]
    lines = [
        "# Object storage: profile over S3 with latency, compaction on S3 vs local disk",
        "",
        f"`make bench` (`bench/bench_object_storage.py --delay-ms {args.delay_ms} --repeat {args.repeat}`), "
        f"{dt.date.today()}, {platform.machine()}, {os.cpu_count()} cores; versitygw v1.8.0 and Iceberg's REST "
        "catalog fixture 1.10.1 on loopback; every S3 request through a proxy adding "
        f"{args.delay_ms} ms (catalog requests not delayed). Best of {args.repeat} after one warm-up.",
        "",
        f"## Profile: {FILES:,} data files in {APPENDS} manifests, {DAYS} partitions",
        "",
        "| method | seconds | vs lakehouse |",
        "|---|---:|---:|",
    ]
    for label, seconds, _ in profile_rows:
        lines.append(f"| {label} | {seconds:.3f} | {seconds / ours:.2f}x |")
    lines += [
        "",
        f"## Compaction: {DAYS} partitions x {COMPACT_FILES} files (~1 MiB), rows verified with pyiceberg",
        "",
        "| where | input MiB | seconds | MiB/s |",
        "|---|---:|---:|---:|",
        f"| S3 (REST catalog, no added latency) | {s3_mib:.0f} | {s3_seconds:.2f} | {s3_mib / s3_seconds:.1f} |",
        f"| local disk (sqlite catalog) | {local_mib:.0f} | {local_seconds:.2f} | {local_mib / local_seconds:.1f} |",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    Path(args.output).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
