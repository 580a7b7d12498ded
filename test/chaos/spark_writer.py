"""Apache Spark as a chaos writer and reader: one long-lived SparkSession (Iceberg's own Java
library through its JDBC catalog on the harness's sqlite file), merge-on-read DELETE, UPDATE and
MERGE, so the table gets position delete files (v2: Parquet, Avro or ORC, as the operation asks)
or deletion vectors (v3) that our compaction must apply and our position-delete rewrite must
merge, while pyiceberg writes copy-on-write beside it; the table's history moved by Java's own
procedures (rollback, set-current, cherry-pick); the upgrade to format v3; and the reference
reader of the rows (with their row lineage on v3), at the current snapshot or an older one.

Protocol (harness.py starts it): ``python spark_writer.py <sqlite file> <warehouse URI> <scratch
dir>``; it prints ``{"ready": true}`` once the session is up, then for each operation read from
stdin as a JSON line (its ``table``: ``<namespace>.<name>``, which the harness made merge-on-read)
prints one JSON line: ``{"ok": true}``, ``{"ok": false, "conflict": …}``
(Iceberg refused to commit because the table moved: CommitFailedException, ValidationException),
or ``{"ok": false, "error": …}`` (anything else, which the harness reports with its seed).

Operations, on rows ``{id, p, val}`` (``delete_format``, optional on the three merge-on-read ones:
``write.delete.format.default`` is set to it first):
  spark_append       rows=[[id, p, val], ...]     INSERT INTO … SELECT (columns added since: NULL)
  spark_delete       ids=[...]                    DELETE … WHERE id IN (…)
  spark_update       rows=[[id, p, val], ...]     UPDATE … SET val = … WHERE id IN (…)
  spark_merge        rows=[[id, p, val], ...]     MERGE … WHEN MATCHED UPDATE, NOT MATCHED INSERT
  spark_delete_partition  p=<int>                 DELETE … WHERE p = … (whole files: a metadata delete)
  spark_rollback     snapshot=<id>                CALL system.rollback_to_snapshot
  spark_set_current  snapshot=<id>                CALL system.set_current_snapshot
  spark_cherrypick   snapshot=<id>                CALL system.cherrypick_snapshot
  spark_upgrade                                   ALTER TABLE … SET TBLPROPERTIES ('format-version'='3')
  spark_read         snapshot=<id or null>, lineage=<bool>
                     → {"ok": true, "rows": [[id, p, val(, _row_id, _last_updated_sequence_number)], ...]}
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))

import spark as sp  # noqa: E402

CATALOG = "chaos"


def literal(value) -> str:
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return str(int(value))


def values(rows: list[list]) -> str:
    return ", ".join(f"({literal(r[0])}, {literal(r[1])}, {literal(r[2])})" for r in rows)


PROCEDURES = {"spark_rollback": "rollback_to_snapshot", "spark_set_current": "set_current_snapshot",
              "spark_cherrypick": "cherrypick_snapshot"}


def statement(table: str, op: dict) -> str:
    """The SQL of a writing operation."""
    kind = op["op"]
    if kind in PROCEDURES:
        # Fully qualified: the namespace is named as the catalog, which a shorter name would be taken for.
        return f"CALL {CATALOG}.system.{PROCEDURES[kind]}(table => '{table}', snapshot_id => {int(op['snapshot'])})"
    if kind == "spark_upgrade":
        return f"ALTER TABLE {table} SET TBLPROPERTIES ('format-version'='3')"
    if kind == "spark_delete_partition":
        return f"DELETE FROM {table} WHERE p = {int(op['p'])}"
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


def insert(session, table: str, rows: list[list]) -> str:
    """INSERT of `rows`, NULL in the (string) columns pyiceberg added: Spark's INSERT with a column
    list refuses to leave the others out."""
    extra = [name for name in session.table(table).columns if name not in ("id", "p", "val")]
    nulls = "".join(f", CAST(NULL AS STRING) AS {name}" for name in extra)
    return f"INSERT INTO {table} SELECT id, p, val{nulls} FROM VALUES {values(rows)} AS s(id, p, val)"


def read(session, table: str, op: dict) -> list[list]:
    """The table's rows as Spark reads them (at ``snapshot`` when given), with their row id and
    last-updated sequence number when ``lineage``."""
    columns = "id, p, val" + (", _row_id, _last_updated_sequence_number" if op.get("lineage") else "")
    at = f" VERSION AS OF {int(op['snapshot'])}" if op.get("snapshot") is not None else ""
    return [list(row) for row in session.sql(f"SELECT {columns} FROM {table}{at}").collect()]


def perform(session, table: str, op: dict) -> dict:
    """One operation's outcome (exceptions are the caller's to classify)."""
    if op["op"] == "spark_read":
        return {"ok": True, "rows": read(session, table, op)}
    if op.get("delete_format"):
        session.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('write.delete.format.default'='{op['delete_format']}')")
    sql = insert(session, table, op["rows"]) if op["op"] == "spark_append" else statement(table, op)
    session.sql(sql).collect()
    return {"ok": True}


def is_conflict(text: str) -> bool:
    """Iceberg refused to commit: the table moved (CommitFailedException, ValidationException), or
    the snapshot to cherry-pick is already picked into the head's history."""
    names = ("CommitFailedException", "ValidationException", "CherrypickAncestorCommitException")
    return any(name in text for name in names)


# A file Spark's write needed is gone: `NotFoundException: File does not exist: <path>`.
MISSING_FILE = re.compile(r"NotFoundException: File does not exist: (\S+)")


def classify(text: str) -> dict:
    """A failed operation's outcome: a conflict (Iceberg refused the commit); a write whose base
    snapshot an expiry with no minimum age removed while it ran (a file it read is gone: Java's
    writers fail so, as pyiceberg's do — the harness checks that no retained snapshot references
    the missing file); anything else an error that stops the run."""
    if is_conflict(text):
        return {"ok": False, "conflict": text[:500]}
    missing = MISSING_FILE.search(text)
    if missing:
        return {"ok": False, "conflict": f"its base snapshot was expired: {text}"[:500], "missing": missing.group(1)}
    return {"ok": False, "error": text[:3000]}


def main() -> int:
    sqlite, warehouse, scratch = sys.argv[1:4]
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
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        op = json.loads(line)
        table = f"{CATALOG}.{op['table']}"
        try:
            outcome = perform(session, table, op)
        except Exception as error:  # noqa: BLE001 - classified for the harness
            outcome = classify(f"{type(error).__name__}: {error}")
        print(json.dumps(outcome), flush=True)
    session.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
