"""bench/results/chaos.md from the summaries `make chaos` appends to bench/results/chaos.jsonl:
counters per configuration, what each invariant checked and caught, then every run."""

from __future__ import annotations

import collections
import json
import sys
from pathlib import Path

# The writers' operations that move a table's history back or sideways.
HISTORY_MOVES = ("spark_rollback", "spark_set_current", "spark_cherrypick", "restore")


def cell(counts: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "-"


def flags(run: dict) -> str:
    """The run's harness flags (older summaries did not record them: told from the table)."""
    spark = " --spark" if "Spark" in run.get("table", "") else ""
    return run.get("configuration") or f"--format {run['format']}{spark}"


def configuration(run: dict) -> str:
    """The run's flags, and its label (which build ran) when it has one."""
    return flags(run) + (f" [{run['label']}]" if run.get("label") else "")


def committed(run: dict, kinds: tuple[str, ...]) -> int:
    """How many of the run's writes of these kinds committed."""
    return sum(count for kind, count in run["writes"].items() if kind in kinds)


def configurations(runs: list[dict]) -> None:
    """A row per configuration: runs, failures, steps and what they exercised."""
    print("## Per configuration\n")
    print("| configuration | runs | passed | failed | steps | our actions | kills | writes during our actions | "
          "conflicts | history moves committed | upgrades to v3 | steps with live delete files |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    groups = collections.defaultdict(list)
    for run in runs:
        groups[configuration(run)].append(run)
    for name, group in sorted(groups.items()):
        failed = sum(1 for r in group if r.get("failed"))
        print(f"| `{name}` | {len(group)} | {len(group) - failed} | {failed} | {sum(r['steps'] for r in group)} | "
              f"{sum(sum(r['actions'].values()) for r in group)} | {sum(r['kills'] for r in group)} | "
              f"{sum(r['concurrent_writes'] for r in group)} | {sum(r['conflicts'] for r in group)} | "
              f"{sum(committed(r, HISTORY_MOVES) for r in group)} | "
              f"{sum(committed(r, ('spark_upgrade',)) for r in group)} | "
              f"{sum(r.get('steps_with_delete_files') or 0 for r in group)} |")
    print()


def invariants(runs: list[dict]) -> None:
    """A row per invariant (and per skipped or undetermined check): how often each configuration's
    runs checked it, and the runs it caught (seed, step, build)."""
    print("## Invariants: checked, and caught\n")
    names = sorted({name for run in runs for name in run["checks"]} | {r["caught"] for r in runs if r.get("caught")})
    configs = sorted({flags(r) for r in runs})
    print("| invariant | " + " | ".join(f"`{c}`" for c in configs) + " | caught (configuration, seed, step, build) |")
    print("|---|" + "---|" * len(configs) + "---|")
    for name in names:
        counts = [sum(r["checks"].get(name, 0) for r in runs if flags(r) == c) for c in configs]
        caught = [f"`{flags(r)}` {r['seed']} step {r['steps']}" + (f" ({r['label']})" if r.get("label") else "")
                  for r in runs if r.get("caught") == name]
        print(f"| {name} | " + " | ".join(str(n) for n in counts) + f" | {'; '.join(caught) or '-'} |")
    print()


def every_run(runs: list[dict]) -> None:
    print("## Every run\n")
    print("| when | host | configuration | table | seed | seconds | steps | writes | our actions | kills (attempts) | "
          "writes during our actions | conflicts | steps with live delete files | invariant checks | result |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in runs:
        caught = r.get("caught") or "see message"
        result = f"FAILED ({caught}): {r.get('failure', '')[:300]}" if r.get("failed") else "passed"
        print(f"| {r.get('when', '')} | {r.get('host', '')} | `{configuration(r)}` | {r['table']} | {r['seed']} | "
              f"{r['seconds']} | {r['steps']} | {cell(r['writes'])} | {cell(r['actions'])} | "
              f"{r['kills']} ({r.get('kill_attempts', '')}) | {r['concurrent_writes']} | {r['conflicts']} | "
              f"{r.get('steps_with_delete_files', '')} | {cell(r['checks'])} | {result} |")


def main() -> None:
    runs = [json.loads(line) for line in Path(sys.argv[1]).read_text().splitlines() if line.strip()]
    print("# Chaos runs (`make chaos`)\n")
    print("Each run is one of test/chaos/harness.py: writers we did not write and our actions at random")
    print("on one table, SIGKILLs, zero-age cleanups, history moved back (rollbacks, RESTORE), the model")
    print("and the invariants checked after every step (see the harness's docstring). A failed run names")
    print("the invariant it broke; its seed and step replay it. Machine: the run's `host` (cores, load")
    print("average at its start).\n")
    configurations(runs)
    invariants(runs)
    every_run(runs)


if __name__ == "__main__":
    main()
