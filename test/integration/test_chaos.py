"""The chaos harness (test/chaos/harness.py), bounded: a seeded run per format inside `make test`.

Writers we did not write (pyiceberg, deltalake) in their own processes, our actions interleaved at
random in the DuckDB CLI (alone, with a writer committing meanwhile, or SIGKILLed at a random
moment), zero-age cleanups; after every step the table must equal the writers' model, every file a
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
SECONDS = float(os.environ.get("LAKEHOUSE_CHAOS_SECONDS", "55"))


@pytest.mark.parametrize("fmt", sorted(harness.SUBJECTS))
def test_a_seeded_chaos_run_keeps_every_row_and_file(lakehouse_extension, tmp_path, fmt):
    run = harness.Run(fmt, SEED, tmp_path / fmt, lakehouse_extension)
    summary = run.run(SECONDS, None)
    print(summary.as_dict())
    assert summary.steps >= 5, summary.as_dict()
    assert summary.checks["rows = model (writer's library)"] >= summary.steps, summary.as_dict()
