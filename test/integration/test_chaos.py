"""The chaos harness (test/chaos/harness.py), bounded: a seeded run per table kind inside `make test`.

Writers we did not write (pyiceberg and deltalake in a process per operation; Apache Spark's
merge-on-read DELETE/UPDATE/MERGE in a long-lived session) and our actions interleaved at random
in the DuckDB CLI (alone, with a writer committing meanwhile, or SIGKILLed at a random moment),
zero-age cleanups; after every step the table must equal the writers' model, every file a
retained snapshot references must exist, and nothing unreferenced may outlive a cleanup. The seed
is fixed here so that CI is reproducible (``LAKEHOUSE_CHAOS_SEED`` and ``LAKEHOUSE_CHAOS_SECONDS``
override it); ``make chaos`` runs for 30 minutes on random seeds.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "chaos"))

import harness  # noqa: E402

SEED = int(os.environ.get("LAKEHOUSE_CHAOS_SEED", "20261207"))
SECONDS = float(os.environ.get("LAKEHOUSE_CHAOS_SECONDS", "50"))


@pytest.mark.parametrize("fmt, spark", [("iceberg", False), ("iceberg", True), ("delta", False)],
                         ids=["iceberg-pyiceberg", "iceberg-pyiceberg-spark", "delta-deltalake"])
def test_a_seeded_chaos_run_keeps_every_row_and_file(lakehouse_extension, tmp_path, fmt, spark):
    run = harness.Run(fmt, SEED, tmp_path / fmt, lakehouse_extension, spark=spark)
    summary = run.run(SECONDS, None)
    print(summary.as_dict())
    assert summary.steps >= 5, summary.as_dict()
    assert summary.checks["rows = model (writer's library)"] > summary.steps, summary.as_dict()
    assert summary.checks["nothing unreferenced after cleanup"] >= 1, summary.as_dict()
    if spark:
        assert summary.steps_with_delete_files > 0, "Spark's merge-on-read left no delete file to apply"
