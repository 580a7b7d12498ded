"""Lays out a local DuckDB extension repository, so that ``INSTALL lakehouse FROM '<dir>'`` works.

DuckDB looks for ``<repository>/v<duckdb version>/<platform>/<name>.duckdb_extension`` (or the
same name with ``.gz``). Our binary is built against DuckDB's stable C API, so one file serves
every DuckDB release that loads it (see docs/install.md, supported versions); this puts a copy (a
hard link where the file system allows) under each version given, for the platform given.

Usage::

    python scripts/extension_repository.py build/release/lakehouse.duckdb_extension build/repository
    python scripts/extension_repository.py EXT DIR --duckdb 1.5.6 --duckdb 1.4.5 --platform linux_amd64

Defaults: the DuckDB releases the version matrix tests (``SUPPORTED``) and the platform of the
Python ``duckdb`` module running this script.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

NAME = "lakehouse"

# DuckDB releases the binary loads in (docs/install.md, "Supported DuckDB versions"; the version
# matrix tests one of each line, `make test-versions`).
SUPPORTED = [
    "1.3.0", "1.3.1", "1.3.2",
    "1.4.0", "1.4.1", "1.4.2", "1.4.3", "1.4.4", "1.4.5",
    "1.5.0", "1.5.1", "1.5.2", "1.5.3", "1.5.4", "1.5.5", "1.5.6",
    "2.0.0", "2.0.1",
]


def platform() -> str:
    """The platform string DuckDB uses in extension paths (``linux_amd64``, ``osx_arm64``, …)."""
    import duckdb

    return duckdb.connect().execute("PRAGMA platform").fetchone()[0]


def lay_out(extension: Path, repository: Path, versions: list[str], target_platform: str) -> list[Path]:
    """Places `extension` under `repository` for each of `versions` on `target_platform`."""
    if not extension.is_file():
        raise SystemExit(f"extension_repository: {extension} does not exist (build it first: make release)")
    placed = []
    for version in versions:
        version = version if version.startswith("v") else f"v{version}"
        target = repository / version / target_platform / f"{NAME}.duckdb_extension"
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists():
            target.unlink()
        try:
            os.link(extension, target)
        except OSError:
            shutil.copyfile(extension, target)
        placed.append(target)
    return placed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("extension", type=Path)
    parser.add_argument("repository", type=Path)
    parser.add_argument("--duckdb", action="append", help="a DuckDB version (repeatable); default: every supported")
    parser.add_argument("--platform", help="default: this Python duckdb's")
    args = parser.parse_args()
    placed = lay_out(args.extension, args.repository, args.duckdb or SUPPORTED, args.platform or platform())
    print(f"{len(placed)} DuckDB versions under {args.repository} "
          f"(INSTALL {NAME} FROM '{args.repository.resolve()}'; LOAD {NAME};)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
