"""Apache Spark as a chaos writer: one long-lived SparkSession (Iceberg's own Java library through
its JDBC catalog on the harness's sqlite file), merge-on-read DELETE, UPDATE and MERGE, so the
table gets position delete files (v2) that our compaction must apply and our position-delete
rewrite must merge, while pyiceberg writes copy-on-write beside it.

Protocol (harness.py starts it): ``python spark_writer.py <sqlite file> <warehouse URI> <table>
<scratch dir>``; it prints ``{"ready": true}`` once the session is up, then for each operation read
from stdin as a JSON line prints one JSON line: ``{"ok": true}``, ``{"ok": false, "conflict": …}``
(Iceberg refused to commit because the table moved: CommitFailedException, ValidationException),
or ``{"ok": false, "error": …}`` (anything else, which the harness reports with its seed).

Operations, on rows ``{id, p, val}``:
  spark_delete  ids=[...]                         DELETE … WHERE id IN (…)
  spark_update  rows=[[id, p, val], ...]          UPDATE … SET val = … WHERE id IN (…)
  spark_merge   rows=[[id, p, val], ...]          MERGE … WHEN MATCHED UPDATE, NOT MATCHED INSERT
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))

import spark as sp  # noqa: E402

CATALOG = "chaos"
MERGE_ON_READ = ", ".join(f"'write.{kind}.mode' = 'merge-on-read'" for kind in ("delete", "update", "merge"))


def literal(value) -> str:
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return str(int(value))


def values(rows: list[list]) -> str:
    return ", ".join(f"({literal(r[0])}, {literal(r[1])}, {literal(r[2])})" for r in rows)


def statement(table: str, op: dict) -> str:
    kind = op["op"]
    if kind == "spark_delete":
        return f"DELETE FROM {table} WHERE id IN ({', '.join(literal(i) for i in op['ids'])})"
    if kind == "spark_update":
        cases = " ".join(f"WHEN {literal(r[0])} THEN {literal(r[2])}" for r in op["rows"])
        ids = ", ".join(literal(r[0]) for r in op["rows"])
        return f"UPDATE {table} SET val = CASE id {cases} END WHERE id IN ({ids})"
    if kind == "spark_merge":
        return (f"MERGE INTO {table} t USING (SELECT * FROM VALUES {values(op['rows'])} AS s(id, p, val)) s "
                "ON t.id = s.id WHEN MATCHED THEN UPDATE SET t.val = s.val "
                "WHEN NOT MATCHED THEN INSERT (id, p, val) VALUES (s.id, s.p, s.val)")
    raise ValueError(f"unknown operation {kind!r}")


def is_conflict(text: str) -> bool:
    return any(name in text for name in ("CommitFailedException", "ValidationException"))


def main() -> int:
    sqlite, warehouse, name, scratch = sys.argv[1:5]
    prefix = f"spark.sql.catalog.{CATALOG}"
    session = (
        sp.session_builder(Path(scratch), "lakehouse-chaos")
        .config(prefix, "org.apache.iceberg.spark.SparkCatalog")
        .config(f"{prefix}.type", "jdbc")
        .config(f"{prefix}.uri", f"jdbc:sqlite:{sqlite}")
        .config(f"{prefix}.warehouse", warehouse)
        .config(f"{prefix}.cache-enabled", "false")
        .config(f"{prefix}.jdbc.init-catalog-tables", "false")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    table = f"{CATALOG}.{name}"
    session.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ({MERGE_ON_READ})")
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        op = json.loads(line)
        try:
            session.sql(statement(table, op)).collect()
            outcome = {"ok": True}
        except Exception as error:  # noqa: BLE001 - classified for the harness
            text = f"{type(error).__name__}: {error}"
            outcome = {"ok": False, "conflict": text[:500]} if is_conflict(text) else {"ok": False, "error": text[:3000]}
        print(json.dumps(outcome), flush=True)
    session.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
