"""bench/results/partial_progress.md from the gate runs `make chaos` appends to
bench/results/partial_progress.jsonl (test/chaos/busy.py): per format and mode, the share of
degraded partitions the gate compacted under a deleting writer — every run, median and worst."""

from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path


def main() -> None:
    runs = [json.loads(line) for line in Path(sys.argv[1]).read_text().splitlines() if line.strip()]
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in runs:
        groups[(r["format"], r.get("delete_every", 2.0), r["partial_progress"])].append(r)
    print("# The gate on a busy table: partial progress off and on (`make chaos`)\n")
    print("test/chaos/busy.py: a fresh table per run (8 partitions of 10 small files, every partition")
    print("degraded), a writer of the table's own library (pyiceberg, deltalake) deleting one random row")
    print("every 2 s (and, harder, every 0.5 s) for the whole gate run (copy-on-write: the file holding")
    print("it is replaced), the gate")
    print("with `partial_progress := false` and `:= true` on the same data (alternating which goes")
    print("first). Share = partitions compacted / degraded partitions. Every run is listed; after each")
    print("the table must read exactly as built less the writer's deletes (checked, by the writer's")
    print("library). \"deletes per run\" counts the writer's deletes that committed: a delete the table")
    print("changed under (our commit replaced its file first) fails and this writer does not retry it, so")
    print("with partial progress, whose commits land sooner, the writer commits fewer of them.\n")
    print("| format | a delete every | partial_progress | runs | share compacted per run | median | worst | "
          "partitions retried | given up | deletes per run | gate seconds (median, worst) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for (fmt, every, partial), rs in sorted(groups.items(), key=lambda kv: (kv[0][0], -kv[0][1], kv[0][2])):
        shares = [r["compacted"] / r["partitions"] for r in rs]
        seconds = [r["seconds"] for r in rs]
        print(f"| {fmt} | {every:g} s | {str(partial).lower()} | {len(rs)} | {', '.join(f'{s:.2f}' for s in shares)} | "
              f"{statistics.median(shares):.2f} | {min(shares):.2f} | {sum(r['retried'] for r in rs)} | "
              f"{sum(r['gave_up'] for r in rs)} | {', '.join(str(r['deletes']) for r in rs)} | "
              f"{statistics.median(seconds):.1f}, {max(seconds):.1f} |")
    errors = [r for r in runs if r.get("error")]
    if errors:
        print("\nRuns the gate failed (without partial progress a conflict costs the whole run):\n")
        for r in errors:
            print(f"- {r['format']}, a delete every {r.get('delete_every', 2.0):g} s, run {r['run']} (seed {r['seed']}): "
                  f"{r['error'][:220]}")


if __name__ == "__main__":
    main()
