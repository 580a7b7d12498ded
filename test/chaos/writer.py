"""One writer operation of the chaos harness, in a process of its own (harness.py starts it).

The writers are libraries we did not write: pyiceberg (on a sqlite SQL catalog) and deltalake.
Usage: ``python writer.py '<json>'`` with ``{"format", "op", ...}`` (with ``"wait": true`` it imports
its library, prints ``ready`` and waits for a line on stdin before it starts); prints one JSON line:
``{"ok": true}`` when the operation committed, ``{"ok": false, "conflict": "<message>"}`` when
the library refused to commit because the table moved under it, ``{"ok": false, "unsupported":
"<message>"}`` when the library cannot do it on this table (pyiceberg: a v3 table, or Avro/ORC
position deletes to read, which Spark writes); the model is then unchanged.
Anything else is an exception and a non-zero exit: the harness reports it with its seed.

Operations (each on rows ``{id: long, p: int, val: string}``, partitioned by ``p``):
  append     rows=[[id, p, val], ...]
  delete     ids=[...]
  overwrite  p=<int>, rows=[...]   (every row of partition p replaced by rows)
  add_column name=<str>            (a nullable string column; later writes leave it null)
  evolve_spec                      (Iceberg: a bucket(4, id) partition field added)
  restore    version=<int>         (Delta: DeltaTable.restore, the table as it was at that version)
"""

from __future__ import annotations

import importlib
import json
import re
import sys

import pyarrow as pa


def rows_table(rows: list[list], schema: pa.Schema) -> pa.Table:
    """`rows` as an Arrow table of `schema` (columns beyond id, p, val are null)."""
    columns = {"id": [r[0] for r in rows], "p": [r[1] for r in rows], "val": [r[2] for r in rows]}
    arrays = [pa.array(columns.get(field.name, [None] * len(rows)), type=field.type) for field in schema]
    return pa.Table.from_arrays(arrays, schema=schema)


# --------------------------------------------------------------------------- Iceberg (pyiceberg)


def iceberg(op: dict) -> None:
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.expressions import EqualTo, In
    from pyiceberg.transforms import BucketTransform
    from pyiceberg.types import StringType

    catalog = SqlCatalog(op["catalog"], uri=op["catalog_uri"], warehouse=op["warehouse"])
    table = catalog.load_table(op["table"])
    kind = op["op"]
    if kind == "append":
        table.append(rows_table(op["rows"], table.schema().as_arrow()))
    elif kind == "delete":
        table.delete(In("id", op["ids"]))
    elif kind == "overwrite":
        table.overwrite(rows_table(op["rows"], table.schema().as_arrow()), overwrite_filter=EqualTo("p", op["p"]))
    elif kind == "add_column":
        with table.update_schema() as update:
            update.add_column(op["name"], StringType())
    elif kind == "evolve_spec":
        with table.update_spec() as update:
            update.add_field("id", BucketTransform(4), "id_bucket")
    else:
        raise ValueError(f"unknown operation {kind!r}")


def iceberg_conflict(error: BaseException) -> bool:
    from pyiceberg.exceptions import CommitFailedException, ValidationException

    # ValidationException: pyiceberg's own check that no file it rewrites was removed meanwhile
    # (a compaction replaced it), raised before it retries the commit.
    return isinstance(error, (CommitFailedException, ValidationException))


# --------------------------------------------------------------------------- Delta (deltalake)


def delta(op: dict) -> None:
    from deltalake import DeltaTable, write_deltalake

    path = op["path"]
    kind = op["op"]
    if kind == "append":
        table = DeltaTable(path)
        write_deltalake(path, rows_table(op["rows"], pa.schema(table.schema().to_arrow())), mode="append")
    elif kind == "delete":
        DeltaTable(path).delete("id IN (" + ", ".join(str(int(i)) for i in op["ids"]) + ")")
    elif kind == "overwrite":
        table = DeltaTable(path)
        write_deltalake(path, rows_table(op["rows"], pa.schema(table.schema().to_arrow())), mode="overwrite",
                        predicate=f"p = {int(op['p'])}")
    elif kind == "restore":
        DeltaTable(path).restore(int(op["version"]))
    elif kind == "add_column":
        table = DeltaTable(path)
        schema = pa.schema(table.schema().to_arrow()).append(pa.field(op["name"], pa.string()))
        write_deltalake(path, rows_table([], schema), mode="append", schema_mode="merge")
    else:
        raise ValueError(f"unknown operation {kind!r}")


def delta_conflict(error: BaseException) -> bool:
    from deltalake.exceptions import CommitFailedError

    return isinstance(error, CommitFailedError)


# What pyiceberg says when it cannot do the operation on this table at all (not a conflict: the
# same operation fails again on a table that does not change).
UNSUPPORTED = ("Delete file format not supported", "Cannot write manifest for table version")


def missing_path(message: str) -> str:
    """The path in pyarrow's "Failed to open local file '<path>'" (its error has no filename)."""
    found = re.search(r"file '([^']+)'", message)
    return found.group(1) if found else ""


def main() -> int:
    op = json.loads(sys.argv[1])
    run, conflict = (iceberg, iceberg_conflict) if op["format"] == "iceberg" else (delta, delta_conflict)
    if op.get("wait"):
        # Libraries imported first, then the harness says when: the commit lands within a
        # fraction of a second of "go" instead of after seconds of imports.
        modules = ["pyiceberg.catalog.sql", "pyiceberg.table"] if op["format"] == "iceberg" else ["deltalake"]
        for module in modules:
            importlib.import_module(module)
        print("ready", flush=True)
        sys.stdin.readline()
    try:
        run(op)
    except FileNotFoundError as error:
        # The snapshot the writer started from was expired (and its files deleted) before it
        # committed: an expiry with no minimum age may do that, as Java's may; nothing was
        # committed. The harness checks the missing file is referenced by no retained snapshot.
        print(json.dumps({"ok": False, "conflict": f"its base snapshot was expired: {error}"[:500],
                          "missing": error.filename or missing_path(str(error))}))
        return 0
    except Exception as error:  # noqa: BLE001 - classified, then re-raised
        if any(text in str(error) for text in UNSUPPORTED):
            print(json.dumps({"ok": False, "unsupported": f"{type(error).__name__}: {error}"[:300]}))
            return 0
        if conflict(error):
            print(json.dumps({"ok": False, "conflict": f"{type(error).__name__}: {error}"[:500]}))
            return 0
        raise
    print(json.dumps({"ok": True}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
