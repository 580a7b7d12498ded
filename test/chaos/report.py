"""bench/results/chaos.md from the summaries `make chaos` appends to bench/results/chaos.jsonl."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def cell(counts: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "-"


def main() -> None:
    runs = [json.loads(line) for line in Path(sys.argv[1]).read_text().splitlines() if line.strip()]
    print("# Chaos runs (`make chaos`)\n")
    print("Each row is one run of test/chaos/harness.py: writers we did not write and our actions at")
    print("random on one table, SIGKILLs, zero-age cleanups, the model checked after every step (see")
    print("the harness's docstring). Machine: the run's `host` (cores, load average at its start).\n")
    print("| when | host | format | table | seed | seconds | steps | writes | our actions | kills (attempts) | "
          "writes during our actions | conflicts | steps with live delete files | invariant checks | result |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in runs:
        print(f"| {r.get('when', '')} | {r.get('host', '')} | {r['format']} | {r['table']} | {r['seed']} | "
              f"{r['seconds']} | {r['steps']} | {cell(r['writes'])} | {cell(r['actions'])} | "
              f"{r['kills']} ({r.get('kill_attempts', '')}) | {r['concurrent_writes']} | {r['conflicts']} | "
              f"{r.get('steps_with_delete_files', '')} | {cell(r['checks'])} | "
              f"{'FAILED: ' + r.get('failure', '')[:300] if r.get('failed') else 'passed'} |")


if __name__ == "__main__":
    main()
