"""The docs' SQL runs: the README's tour statement by statement on the demo table, and the run
history trend query of docs/functions/gate.md on a history of real gate runs. Each is read from
the document itself, so a doc that drifts from the code fails here."""

from __future__ import annotations

import re
from pathlib import Path


REPO = Path(__file__).resolve().parents[2]


def sql_blocks(document: Path) -> list[str]:
    return re.findall(r"```sql\n(.*?)```", document.read_text(), flags=re.S)


def without_comment(line: str) -> str:
    """`line` without its `--` comment (one outside a string literal)."""
    quoted = False
    for i, ch in enumerate(line):
        if ch == "'":
            quoted = not quoted
        elif not quoted and line.startswith("--", i):
            return line[:i]
    return line


def statements(block: str) -> list[str]:
    text = "\n".join(without_comment(line) for line in block.splitlines())
    return [s.strip() for s in text.split(";") if s.strip()]


def test_the_readme_tour_runs(con, tmp_path):
    (tour,) = [b for b in sql_blocks(REPO / "README.md") if "lakehouse_demo(" in b]
    table = str(tmp_path / "tour")
    results = {}
    for sql in statements(tour.replace("/tmp/lakehouse_tour", table)):
        if sql == "LOAD lakehouse":
            continue  # the fixture loaded the build under test by path
        function = re.search(r"FROM (lakehouse_\w+)\(", sql).group(1)
        results[function] = con.execute(sql).fetchall()
    assert results["lakehouse_demo"] == [(167, 16)]
    profile = {r[0]: r for r in results["lakehouse_fragmentation"]}
    assert profile["partition_date=2026-10-01"][3] == " █  │▁  ", profile
    assert {r[1] for r in results["lakehouse_compact"]} == {"would compact", "healthy"}
    gate = {r[0]: r for r in results["lakehouse_gate"]}
    assert gate["partition_date=2026-10-01"][1:3] == ("compacted", "committed"), gate
    assert gate["partition_date=2026-10-01"][4] == "    │█  ", "one target-sized file after"
    assert all(action == "kept: referenced" or action.startswith("would") or action.startswith("kept")
               for _, action in results["lakehouse_remove_orphan_files"]), results["lakehouse_remove_orphan_files"]


def test_the_run_history_trend_query_runs(con, tmp_path):
    """Issue 49, item 8: the documented trend leaves dry runs out, shows a failed run with its
    error, and groups tables named by path."""
    (trend,) = [b for b in sql_blocks(REPO / "docs" / "functions" / "gate.md") if "FROM read_parquet" in b]
    table, missing, history = str(tmp_path / "demo"), str(tmp_path / "missing"), tmp_path / "history"
    con.execute(f"SELECT * FROM lakehouse_demo('{table}')")
    scaled = "small_file_threshold_mb := 0.064, target_file_size_mb := 0.128"
    for name, dry_run in ((table, "true"), (table, "false"), (missing, "false"), (table, "false")):
        try:
            con.execute(f"SELECT * FROM lakehouse_gate('{name}', {scaled}, dry_run := {dry_run}, "
                        f"history_path := '{history}')").fetchall()
        except Exception as e:  # the missing table's run fails, and is recorded
            assert name == missing, e
    rows = con.execute(trend.replace("/var/lib/lakehouse/history", str(history))).fetchall()
    assert [(r[0], r[2]) for r in rows] == [(table, "maintained"), (table, "optimal"), (missing, "failed")], rows
    (files_before, files_after, small_before, small_after) = rows[0][3:7]
    assert files_after < files_before and small_after < small_before, rows
    assert rows[1][3] == rows[0][4], "the next run starts where the last left the table"
    assert rows[0][7] > 0, "the demo's old snapshots were expired"
    assert all(isinstance(r[9], str) for r in rows), "the bar renders"
    assert rows[2][10] and "missing" in rows[2][10] and rows[0][10] is None, rows


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(document: Path) -> set[str]:
    anchors, fence = set(), False
    for line in document.read_text().splitlines():
        if line.startswith("```"):
            fence = not fence
        elif not fence and re.match(r"#{1,6} ", line):
            anchors.add(_slug(line.lstrip("#")))
    return anchors


def test_every_link_between_the_docs_resolves():
    """README.md and docs/: every relative link names an existing file, and every #anchor a
    heading of the page it points to."""
    broken = []
    pages = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    for page in pages:
        text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            resolved = (page.parent / path).resolve() if path else page
            if not resolved.exists():
                broken.append(f"{page.relative_to(REPO)}: {target} (no such file)")
            elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
                broken.append(f"{page.relative_to(REPO)}: {target} (no such heading)")
    assert not broken, "\n".join(broken)
    assert len((REPO / "README.md").read_text().splitlines()) <= 300, "the README stays a front page"


# Statements of the docs that need what a test of their own provides (a server, a catalog by
# name, object storage, dbt), by the marker that shows it, and where they are tested.
NEEDS_A_SERVER = {
    "catalog := 'prod'": "test_spark_executor.py (Spark Connect and a shared catalog)",
    "'prod.analytics.events'": "test_object_storage.py (a REST catalog)",
    "s3://": "test_object_storage.py (versitygw)",
    "LOAD httpfs": "test_object_storage.py",
    "catalog_uri := 'sqlite:////data/": "test_profile_iceberg.py (a SQL catalog by name)",
    "LOAD '": "every test loads the build under test by path",
    "lakehouse_notify_slack('": "test_scalar_rows.py (a Slack stand-in on loopback, $SLACK_WEBHOOK_URL)",
}


def test_every_sql_example_in_the_docs_runs(con, tmp_path):
    """Each statement of each ```sql block in docs/ runs on real tables — the demo table for an
    Iceberg name or path, a deltalake-written table for a Delta path — unless it needs a server
    another test provides (NEEDS_A_SERVER). Nothing is checked but that it runs: the pages'
    claims are the other tests' to check."""
    import pyarrow as pa
    from deltalake import write_deltalake

    demo, clicks, delta = tmp_path / "events", tmp_path / "clicks", tmp_path / "delta"
    for path in (demo, clicks):
        con.execute(f"SELECT * FROM lakehouse_demo('{path}')")
    for i in range(4):
        write_deltalake(str(delta), pa.table({"id": list(range(i * 10, i * 10 + 10)), "p": [i % 2] * 10}),
                        mode="append", partition_by=["p"])
    replace = {
        "'analytics.events'": f"'{demo}'",
        "'analytics.clicks'": f"'{clicks}'",
        "'/lake/events'": f"'{delta}'",
        "'warehouse/analytics/events/metadata/v16.metadata.json'": f"'{demo}/metadata/v16.metadata.json'",
        "'/tmp/events_lakehouse'": f"'{tmp_path / 'another_demo'}'",
        "'/var/lib/lakehouse/history": f"'{tmp_path / 'history'}",
    }
    ran, skipped = 0, 0
    for page in sorted((REPO / "docs").rglob("*.md")):
        for block in sql_blocks(page):
            for sql in statements(block):
                if any(marker in sql for marker in NEEDS_A_SERVER):
                    skipped += 1
                    continue
                for old, new in replace.items():
                    sql = sql.replace(old, new)
                try:
                    con.execute(sql).fetchall()
                except Exception as e:  # noqa: BLE001 - reported with the page
                    raise AssertionError(f"{page.relative_to(REPO)}: {sql}\n{e}") from e
                ran += 1
    assert ran >= 22 and skipped == 8, (ran, skipped)  # a new example needing a server: say which test covers it
