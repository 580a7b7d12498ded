"""The chaos harness (test/chaos/harness.py), bounded: a seeded run per configuration inside `make test`.

Writers we did not write (pyiceberg and deltalake in a process per operation; Apache Spark's
merge-on-read DELETE/UPDATE/MERGE, appends and Iceberg's rollback, set-current and cherry-pick
procedures in a long-lived session; deltalake's RESTORE) and our actions interleaved at random in
the DuckDB CLI (alone, with a writer committing meanwhile, or SIGKILLed at a random moment),
zero-age cleanups; after every step the table must equal the writers' model (as Spark reads it
too, when it writes), every file a retained snapshot references must exist, nothing unreferenced
may outlive a cleanup, each commit of ours must read as its parent (and a compaction's descend
from what it read), and on v3 (a table upgraded mid-run) row ids must stay unique and unchanged
by our actions. Each configuration has its own fixed seed so that CI is reproducible
(``LAKEHOUSE_CHAOS_SEED`` and ``LAKEHOUSE_CHAOS_SECONDS`` override them); ``make chaos`` runs 10
minutes of each on random seeds.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "chaos"))

import harness  # noqa: E402

SECONDS = float(os.environ.get("LAKEHOUSE_CHAOS_SECONDS", "50"))
# configuration id → (format, Spark, upgraded to v3 mid-run, seed)
CONFIGURATIONS = {
    "iceberg-pyiceberg": ("iceberg", False, False, 20261207),
    "iceberg-pyiceberg-spark": ("iceberg", True, False, 20261207),
    "iceberg-v2-to-v3-spark": ("iceberg", True, True, 22),
    "delta-deltalake-restore": ("delta", False, False, 20261207),
}


@pytest.mark.parametrize("name", sorted(CONFIGURATIONS))
def test_a_seeded_chaos_run_keeps_every_row_and_file(lakehouse_extension, tmp_path, name):
    fmt, spark, upgrade, seed = CONFIGURATIONS[name]
    seed = int(os.environ.get("LAKEHOUSE_CHAOS_SEED", seed))
    run = harness.Run(fmt, seed, tmp_path / fmt, lakehouse_extension, spark=spark, upgrade=upgrade)
    summary = run.run(SECONDS, None)
    print(summary.as_dict())
    assert summary.steps >= 5, summary.as_dict()
    assert summary.checks[f"{harness.ROWS} ({run.reference()})"] > summary.steps, summary.as_dict()
    assert summary.checks[harness.CLEAN] >= 1, summary.as_dict()
    assert summary.checks[harness.CARRIES] >= 1, "no commit of ours was checked against its parent"
    if spark:
        assert summary.steps_with_delete_files > 0, "Spark's merge-on-read left no delete file to apply"
    if upgrade:
        assert summary.writes["spark_upgrade"] >= 1, summary.as_dict()
        assert summary.checks[harness.UNIQUE] > 0 and summary.checks[harness.LINEAGE] > 0, summary.as_dict()
