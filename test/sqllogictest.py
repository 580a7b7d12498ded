#!/usr/bin/env python3
"""A small sqllogictest runner for the lakehouse extension, over the Python duckdb package.

Usage::

    python test/sqllogictest.py [--extension PATH] [-v] [FILE_OR_DIR ...]

Without arguments it runs every ``test/sql/**/*.test``. Each file runs in a fresh in-memory
DuckDB (``allow_unsigned_extensions``). One line is printed per file (``PASS``/``FAIL``/
``SKIP``; failures are followed by indented details), then the closing line
``N passed, N failed`` (``, N skipped`` appended when files were skipped). The exit status is
non-zero when a file failed or no file was found.

Supported file syntax (a subset of DuckDB's sqllogictest dialect). Records are separated by
blank lines; lines starting with ``#`` between records are comments.

``require lakehouse``
    LOADs the extension: ``--extension``, else ``$LAKEHOUSE_EXTENSION``, else
    ``build/debug/lakehouse.duckdb_extension`` (relative paths are relative to the repository
    root). A missing extension file fails the file. Any other ``require`` skips the file.

``statement ok``
    The SQL on the following lines (up to a blank line) must succeed.

``statement error``
    The SQL must fail. An optional ``----`` line may follow the SQL, then expected message
    fragments, one per line up to a blank line: each fragment must be a substring of the error
    message (for a single line this is DuckDB's own rule).

``query <types> [nosort|rowsort|valuesort]``
    ``<types>`` has one letter per result column (``I`` integer, ``R`` real, ``T`` text, any
    other letter is accepted as text). After the SQL comes ``----`` and the expected rows, one
    per line, columns separated by a single TAB. Alternatively every value may be on its own
    line (DuckDB's value-wise format; recognised when the line count is rows × columns and no
    line contains a TAB). ``rowsort`` sorts actual and expected rows (as strings) before
    comparing, ``valuesort`` sorts all values, ``nosort`` (the default) compares in order.

Values are rendered as follows: NULL → ``NULL``; booleans → ``true``/``false``; the empty
string → ``(empty)``; integers → decimal digits; floats → Python ``repr`` (the shortest
round-trip form, e.g. ``0.1``, ``1.0``, ``1e-05``, ``inf``, ``nan``), which matches DuckDB's
DOUBLE→VARCHAR cast for ordinary values; everything else → ``str(value)`` (dates
``2026-10-01``, timestamps ``2026-10-01 05:00:00``, decimals, lists as Python prints them).
In ``R`` columns a value that differs textually still matches when both sides parse as floats
within a relative tolerance of 1e-9.

``__TEST_DIR__`` is replaced by a fresh temporary directory per file (removed afterwards) and
``__WORKING_DIRECTORY__`` by the repository root, in SQL and in expected output alike.
``loop``/``foreach``, ``mode``, ``skipif``/``onlyif`` and ``load`` are not supported.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import duckdb

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_EXTENSION = "build/debug/lakehouse.duckdb_extension"
DEFAULT_TEST_GLOB = "test/sql/**/*.test"
SORT_MODES = ("nosort", "rowsort", "valuesort")
REAL_TOLERANCE = 1e-9


# --------------------------------------------------------------------------- parsing


class ParseError(Exception):
    """A malformed test file."""


class SkipFile(Exception):
    """The file cannot run here (an unsupported ``require``)."""


@dataclasses.dataclass
class Record:
    """One directive of a test file."""

    kind: str  # "require", "statement ok", "statement error", "query"
    line: int  # 1-based line of the directive
    sql: str = ""
    expected: list[str] = dataclasses.field(default_factory=list)
    types: str = ""
    sort: str = "nosort"
    argument: str = ""  # the name after `require`


def _take_block(lines: list[str], i: int) -> tuple[list[str], int]:
    """Lines from ``i`` up to (not including) the next blank line or end; returns (block, next i)."""
    block = []
    while i < len(lines) and lines[i].strip() != "":
        block.append(lines[i])
        i += 1
    return block, i


def _split_sql(block: list[str], line_no: int, need_results: bool) -> tuple[str, list[str]]:
    """Splits a record body at ``----`` into SQL and expected lines."""
    if "----" in block:
        cut = block.index("----")
        sql, expected = block[:cut], block[cut + 1 :]
    else:
        if need_results:
            raise ParseError(f"line {line_no}: query without ---- separator")
        sql, expected = block, []
    if not sql:
        raise ParseError(f"line {line_no}: missing SQL")
    return "\n".join(sql), expected


def parse(text: str) -> list[Record]:
    """Parses a test file into records."""
    lines = text.splitlines()
    records: list[Record] = []
    i = 0
    while i < len(lines):
        stripped = lines[i].strip()
        line_no = i + 1
        if stripped == "" or stripped.startswith("#"):
            i += 1
            continue
        words = stripped.split()
        head = words[0]
        if head == "require":
            if len(words) != 2:
                raise ParseError(f"line {line_no}: require takes one name")
            records.append(Record("require", line_no, argument=words[1]))
            i += 1
        elif head == "statement":
            if len(words) != 2 or words[1] not in ("ok", "error"):
                raise ParseError(f"line {line_no}: expected 'statement ok' or 'statement error'")
            block, i = _take_block(lines, i + 1)
            sql, expected = _split_sql(block, line_no, need_results=False)
            if words[1] == "ok" and expected:
                raise ParseError(f"line {line_no}: 'statement ok' takes no expected output")
            records.append(Record(f"statement {words[1]}", line_no, sql=sql, expected=expected))
        elif head == "query":
            if len(words) < 2 or len(words) > 3:
                raise ParseError(f"line {line_no}: expected 'query <types> [sort]'")
            sort = words[2] if len(words) == 3 else "nosort"
            if sort not in SORT_MODES:
                raise ParseError(f"line {line_no}: unknown sort mode {sort!r} (use {', '.join(SORT_MODES)})")
            block, i = _take_block(lines, i + 1)
            sql, expected = _split_sql(block, line_no, need_results=True)
            records.append(Record("query", line_no, sql=sql, expected=expected, types=words[1], sort=sort))
        else:
            raise ParseError(f"line {line_no}: unsupported directive {head!r}")
    return records


# --------------------------------------------------------------------------- values


def render(value: Any) -> str:
    """A result value as the expected-output text (see the module docstring)."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    text = str(value)
    return "(empty)" if text == "" else text


def values_match(actual: str, expected: str, type_letter: str) -> bool:
    """Textual equality, or float closeness in ``R`` columns."""
    if actual == expected:
        return True
    if type_letter != "R":
        return False
    try:
        a, e = float(actual), float(expected)
    except ValueError:
        return False
    if math.isnan(a) or math.isnan(e):
        return math.isnan(a) and math.isnan(e)
    return math.isclose(a, e, rel_tol=REAL_TOLERANCE, abs_tol=1e-12)


def expected_rows(record: Record, n_cols: int, n_actual: int) -> list[list[str]]:
    """The expected lines of a query split into rows of values."""
    lines = record.expected
    value_wise = n_cols > 1 and lines and all("\t" not in l for l in lines) and len(lines) == n_actual * n_cols
    if value_wise:
        return [lines[k : k + n_cols] for k in range(0, len(lines), n_cols)]
    return [line.split("\t") for line in lines]


# --------------------------------------------------------------------------- running


class Failure(Exception):
    """A record did not behave as expected."""


@dataclasses.dataclass
class Context:
    """What a file run needs besides its records."""

    extension: Path
    test_dir: str


def substitute(text: str, ctx: Context) -> str:
    """Replaces ``__TEST_DIR__`` and ``__WORKING_DIRECTORY__``."""
    return text.replace("__TEST_DIR__", ctx.test_dir).replace("__WORKING_DIRECTORY__", str(REPO_ROOT))


def run_require(con: duckdb.DuckDBPyConnection, record: Record, ctx: Context) -> None:
    if record.argument != "lakehouse":
        raise SkipFile(f"require {record.argument}")
    if not ctx.extension.is_file():
        raise Failure(f"extension {ctx.extension} does not exist (build it, or set LAKEHOUSE_EXTENSION)")
    con.execute(f"LOAD '{ctx.extension}'")


def run_statement_ok(con: duckdb.DuckDBPyConnection, record: Record, ctx: Context) -> None:
    try:
        con.execute(substitute(record.sql, ctx)).fetchall()
    except duckdb.Error as error:
        raise Failure(f"statement failed: {error}") from None


def run_statement_error(con: duckdb.DuckDBPyConnection, record: Record, ctx: Context) -> None:
    try:
        con.execute(substitute(record.sql, ctx)).fetchall()
    except duckdb.Error as error:
        message = str(error)
        missing = [f for f in (substitute(l, ctx) for l in record.expected) if f.strip() and f not in message]
        if missing:
            raise Failure(
                "error message does not contain the expected fragment(s)\n"
                + "".join(f"  expected fragment: {f}\n" for f in missing)
                + f"  actual message:    {message}"
            ) from None
        return
    raise Failure("statement succeeded but an error was expected")


def run_query(con: duckdb.DuckDBPyConnection, record: Record, ctx: Context) -> None:
    try:
        cursor = con.execute(substitute(record.sql, ctx))
        rows = cursor.fetchall()
        n_cols = len(cursor.description or [])
    except duckdb.Error as error:
        raise Failure(f"query failed: {error}") from None
    if n_cols != len(record.types):
        raise Failure(f"query returned {n_cols} columns but types {record.types!r} declare {len(record.types)}")
    actual = [[render(v) for v in row] for row in rows]
    expected = [[substitute(v, ctx) for v in row] for row in expected_rows(record, n_cols, len(actual))]
    for k, row in enumerate(expected):
        if len(row) != n_cols:
            raise Failure(f"expected row {k + 1} has {len(row)} values, the query has {n_cols} columns: {row!r}")
    if record.sort == "rowsort":
        actual, expected = sorted(actual), sorted(expected)
    elif record.sort == "valuesort":
        flat_a, flat_e = sorted(v for r in actual for v in r), sorted(v for r in expected for v in r)
        actual = [[v] for v in flat_a]
        expected = [[v] for v in flat_e]
    types = record.types if record.sort != "valuesort" else "T"
    same = len(actual) == len(expected) and all(
        all(values_match(a, e, types[c] if c < len(types) else "T") for c, (a, e) in enumerate(zip(ra, re)))
        for ra, re in zip(actual, expected)
    )
    if not same:
        lines = ["wrong result", "  expected:"] + [f"    {chr(9).join(r)}" for r in expected]
        lines += ["  actual:"] + [f"    {chr(9).join(r)}" for r in actual]
        raise Failure("\n".join(lines))


RUNNERS = {
    "require": run_require,
    "statement ok": run_statement_ok,
    "statement error": run_statement_error,
    "query": run_query,
}


@dataclasses.dataclass
class Outcome:
    """Result of one file."""

    status: str  # PASS, FAIL, SKIP
    detail: str = ""
    records: int = 0


def run_file(path: Path, extension: Path, verbose: bool = False) -> Outcome:
    """Runs one test file in a fresh in-memory DuckDB."""
    try:
        records = parse(path.read_text())
    except (OSError, ParseError) as error:
        return Outcome("FAIL", f"parse error: {error}")
    test_dir = tempfile.mkdtemp(prefix="lakehouse-sqllogictest-")
    con = duckdb.connect(":memory:", config={"allow_unsigned_extensions": "true"})
    ctx = Context(extension=extension, test_dir=test_dir)
    try:
        for record in records:
            if verbose:
                print(f"    line {record.line}: {record.kind} {record.sql.splitlines()[0] if record.sql else record.argument}")
            try:
                RUNNERS[record.kind](con, record, ctx)
            except Failure as failure:
                sql = f"\n  sql: {substitute(record.sql, ctx)}" if record.sql else ""
                return Outcome("FAIL", f"line {record.line}: {record.kind}: {failure}{sql}")
        return Outcome("PASS", records=len(records))
    except SkipFile as skip:
        return Outcome("SKIP", str(skip))
    finally:
        con.close()
        shutil.rmtree(test_dir, ignore_errors=True)


def collect(targets: list[str]) -> list[Path]:
    """Test files named by ``targets`` (files, or directories searched for ``*.test``)."""
    if not targets:
        return sorted(REPO_ROOT.glob(DEFAULT_TEST_GLOB))
    files: list[Path] = []
    for target in targets:
        path = Path(target)
        if path.is_dir():
            files.extend(sorted(path.rglob("*.test")))
        else:
            files.append(path)
    return files


def extension_path(explicit: str | None) -> Path:
    """The extension to load for ``require lakehouse``."""
    path = Path(explicit or os.environ.get("LAKEHOUSE_EXTENSION") or DEFAULT_EXTENSION)
    return path if path.is_absolute() else REPO_ROOT / path


def display(path: Path) -> str:
    """``path`` relative to the repository root when possible."""
    try:
        return str(path.resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("targets", nargs="*", help="test files or directories (default: test/sql/**/*.test)")
    parser.add_argument("--extension", help="extension file to load (default: $LAKEHOUSE_EXTENSION or build/debug/…)")
    parser.add_argument("-v", "--verbose", action="store_true", help="print each record as it runs")
    args = parser.parse_args(argv)
    # No statement here may reach a real Slack: a developer's webhook in the environment is what
    # the one-argument lakehouse_notify_slack and the gate would otherwise post to.
    os.environ.pop("SLACK_WEBHOOK_URL", None)

    files = collect(args.targets)
    extension = extension_path(args.extension)
    counts = {"PASS": 0, "FAIL": 0, "SKIP": 0}
    for path in files:
        if not path.is_file():
            outcome = Outcome("FAIL", "no such file")
        else:
            outcome = run_file(path, extension, args.verbose)
        counts[outcome.status] += 1
        if outcome.status == "PASS":
            print(f"PASS {display(path)} ({outcome.records} records)")
        elif outcome.status == "SKIP":
            print(f"SKIP {display(path)}: {outcome.detail}")
        else:
            first, *rest = outcome.detail.splitlines() or [""]
            print(f"FAIL {display(path)}: {first}")
            for line in rest:
                print(f"    {line}")
        sys.stdout.flush()

    closing = f"{counts['PASS']} passed, {counts['FAIL']} failed"
    if counts["SKIP"]:
        closing += f", {counts['SKIP']} skipped"
    print(closing)
    if not files:
        print("no test files found", file=sys.stderr)
        return 2
    return 1 if counts["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())
