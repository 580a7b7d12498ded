#!/usr/bin/env python3
"""The crate's module dependency graph, from the source: which file uses which, and whether any
import closes a cycle or points up a layer.

Usage::

    python3 scripts/module_graph.py            # prints the graph, one module per line
    python3 scripts/module_graph.py --check    # prints nothing and exits 0 when the graph is clean

A module is a file under `src/` (`src/table/iceberg/commit.rs` is `table::iceberg::commit`, a
`mod.rs` names its folder). A module depends on another when its code names a path into it:
`crate::a::b::…`, `super::…`, or a `use` of either. Tests (everything from the first
`#[cfg(test)]` on) and comments, doc links among them, are not code here. A path is resolved to the longest module prefix that exists, so `crate::table::Table`
depends on `table` and `crate::table::iceberg::IcebergTable` on `table::iceberg`.

`--check` fails (exit 1) on
- a cycle between modules (each printed as `a -> b -> … -> a`), and
- an upward import: each module has a layer (LAYERS below; a module in a folder takes its
  folder's layer unless listed itself), and a module may use only its own layer or lower ones.
A parent module declaring its children (`pub mod x;`) is not a dependency.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

# Lower numbers are lower layers: a module may use modules of its layer or below. The order is
# the crate doc's: functions → gate/serve → actions → plans/profile/health → table → catalog/store
# → duck/error/runtime.
LAYERS: dict[str, int] = {
    "error": 0,
    "runtime": 0,
    "interrupt": 0,
    "progress_lines": 0,
    "scheduler": 0,
    "duck": 1,
    "store": 2,
    "catalog": 3,
    "table": 4,
    "spark": 4,
    "report": 5,
    "profile": 5,
    "plan": 5,
    "health": 6,
    "notify": 6,
    "action": 7,
    "demo": 7,
    "serve": 8,
    "functions": 9,
    "fuzz": 10,
    "lib": 10,
}


def module_of(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "mod":
        parts = parts[:-1]
    return "::".join(parts) if parts != ["lib"] else "lib"


def source_without_tests(path: Path) -> str:
    """The file's code: tests (from the first `#[cfg(test)]`) and `//` comments (docs included:
    a link in a doc comment is not an import) left out."""
    text = path.read_text()
    cut = text.find("#[cfg(test)]")
    text = text if cut < 0 else text[:cut]
    return "\n".join(re.sub(r"//.*$", "", line) for line in text.splitlines())


PATH = re.compile(r"\b(crate|super)((?:::[A-Za-z_][A-Za-z0-9_]*)+)")
USE_GROUP = re.compile(r"\buse\s+(crate|super)((?:::[A-Za-z_][A-Za-z0-9_]*)*)::\{([^;]*)\}", re.S)


def top_level_items(group: str) -> list[str]:
    """The comma-separated items of a `use` group, nested groups kept whole."""
    items, depth, current = [], 0, ""
    for ch in group:
        if ch == "," and depth == 0:
            items.append(current.strip())
            current = ""
            continue
        depth += ch == "{"
        depth -= ch == "}"
        current += ch
    items.append(current.strip())
    return [i for i in items if i]


def references(module: str, text: str, modules: set[str]) -> set[str]:
    """The modules `module`'s text names."""
    out: set[str] = set()
    parent = module.rsplit("::", 1)[0] if "::" in module else ""
    # A mod.rs's `super` is its folder's parent; a file's `super` is its folder.

    def resolve(root: str, tail: list[str]) -> None:
        base = [] if root == "crate" else ([p for p in parent.split("::") if p] if parent else [])
        while tail and tail[0] == "super":
            base = base[:-1]
            tail = tail[1:]
        full = base + tail
        for n in range(len(full), 0, -1):
            candidate = "::".join(full[:n])
            if candidate in modules:
                if candidate != module:
                    out.add(candidate)
                return

    for m in USE_GROUP.finditer(text):
        head = [p for p in m.group(2).split("::") if p]
        for item in top_level_items(m.group(3)):
            path = item.split(" as ")[0].split("{")[0]
            resolve(m.group(1), head + [p.strip() for p in path.split("::") if p.strip() and p.strip() != "self"])
    for m in PATH.finditer(text):
        resolve(m.group(1), [p for p in m.group(2).split("::") if p])
    return out


def graph() -> dict[str, set[str]]:
    files = sorted(SRC.rglob("*.rs"))
    modules = {module_of(f): f for f in files}
    names = set(modules)
    return {m: references(m, source_without_tests(f), names) for m, f in modules.items()}


def layer(module: str) -> int:
    parts = module.split("::")
    for n in range(len(parts), 0, -1):
        if "::".join(parts[:n]) in LAYERS:
            return LAYERS["::".join(parts[:n])]
    raise KeyError(f"module {module} has no layer in scripts/module_graph.py LAYERS")


def cycles(deps: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component of more than one module, as a cycle through it."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(deps.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for v in sorted(deps):
        if v not in index:
            visit(v)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail on a cycle or an upward import")
    args = parser.parse_args(argv)
    deps = graph()
    problems: list[str] = []
    for component in cycles(deps):
        problems.append("cycle: " + " <-> ".join(component))
    for module, used in sorted(deps.items()):
        for other in sorted(used):
            if layer(other) > layer(module):
                problems.append(f"upward import: {module} (layer {layer(module)}) uses {other} (layer {layer(other)})")
    if not args.check:
        for module, used in sorted(deps.items(), key=lambda kv: (layer(kv[0]), kv[0])):
            print(f"[{layer(module)}] {module} -> {', '.join(sorted(used)) or '-'}")
    for p in problems:
        print(p, file=sys.stderr)
    if args.check and not problems:
        print(f"module graph: {len(deps)} modules, no cycle, no upward import")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
