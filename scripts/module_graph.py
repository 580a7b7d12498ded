#!/usr/bin/env python3
"""The crate's module dependency graph, from the source: which file uses which, and whether any
import closes a cycle or points up a layer.

Usage::

    python3 scripts/module_graph.py            # prints the graph, one module per line
    python3 scripts/module_graph.py --check    # one line and exit 0 when the graph is clean

A module is a file under `src/` (`src/table/iceberg/commit.rs` is `table::iceberg::commit`, a
`mod.rs` names its folder). A module depends on another when its code names a path into it,
in a `use` or anywhere else. A path starts at
- `crate::`, `super::` (repeatable; a module's parent, whether it is `x.rs` or `x/mod.rs`) or
  `self::`;
- a child module of the module it is written in: a bare child path (`object::read` or
  `use object::…` in `store/mod.rs` names `store::object`);
- a name the module imported (`use crate::store;` then `store::read`); the `use` of a whole
  module is not itself a dependency, the paths through it are.
A path then resolves to the longest module prefix that exists (`crate::table::iceberg::IcebergTable`
is `table::iceberg`), and on through a name that module imports: `crate::store::Location`, which
`store/mod.rs` re-exports with `pub use location::…`, names `store::location`, and `store`
depends on `store::location` for the re-export. So a folder's `mod.rs` that holds code its
children use, and re-exports or calls them, closes a cycle; a `mod.rs` that only declares and
re-exports its children does not. Tests (everything from the first `#[cfg(test)] mod` on) and
comments, doc links among them, are not code here; a parent declaring its children
(`pub mod x;`) is not a dependency.

`--check` fails (exit 1), printing each problem, on
- a cycle: each strongly connected set of modules, as one shortest cycle through it
  (`a -> b -> a`) and every dependency inside the set with the path that makes it;
- an upward import: each module has a layer (LAYERS below; a module in a folder takes its
  folder's layer), and a module may use only its own layer or lower ones;
- LAYERS disagreeing with the layer chain the crate doc's Layout section opens with (`src/lib.rs`),
  or naming a top-level module that does not exist, or missing one.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

# Lower numbers are lower layers: a module may use modules of its layer or below. The order is
# the crate doc's layer chain (checked: `doc_problems`); `lib` (the root) and `fuzz` (test builds'
# fuzzer of every reader) sit above everything.
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
    "notify": 6,
    "action": 7,
    "demo": 7,
    "functions": 8,
    "fuzz": 9,
    "lib": 9,
}


def module_of(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "mod":
        parts = parts[:-1]
    return "::".join(parts) if parts != ["lib"] else "lib"


def source_without_tests(path: Path) -> str:
    """The file's code: tests (from the first `#[cfg(test)] mod`) and `//` comments (docs included:
    a link in a doc comment is not an import) left out."""
    text = path.read_text()
    cut = re.search(r"#\[cfg\(test\)\]\s*(pub(\([a-z]+\))?\s+)?mod\s", text)
    text = text if cut is None else text[: cut.start()]
    return "\n".join(re.sub(r"//.*$", "", line) for line in text.splitlines())


PATH = re.compile(r"(?<![A-Za-z0-9_:])([A-Za-z_][A-Za-z0-9_]*)((?:\s*::\s*[A-Za-z_][A-Za-z0-9_]*)+)")
USE = re.compile(r"\buse\s+([^;]*);", re.S)


def split_top(group: str) -> list[str]:
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


def expand_use(tree: str, prefix: list[str] | None = None) -> list[tuple[list[str], str]]:
    """A `use` tree's imports, each as (path, the name it binds): `a::{b, c::d as e, self}` gives
    (a::b, b), (a::c::d, e) and (a, a); a glob binds `*`."""
    prefix = prefix or []
    tree = tree.strip()
    if not prefix and tree.startswith("::"):
        return []  # `::name` is an external crate
    brace = tree.find("{")
    if brace >= 0:
        head = [p.strip() for p in tree[:brace].split("::") if p.strip()]
        inner = tree[brace + 1 : tree.rfind("}")]
        out: list[tuple[list[str], str]] = []
        for item in split_top(inner):
            out += expand_use(item, prefix + head)
        return out
    parts = re.split(r"\s+as\s+", tree, maxsplit=1)
    segments = [p.strip() for p in parts[0].split("::") if p.strip()]
    if segments and segments[-1] == "self":
        segments = segments[:-1]
    full = prefix + segments
    if not full:
        return []
    return [(full, parts[1].strip() if len(parts) > 1 else full[-1])]


class Resolver:
    """Resolves a path written in a module to the module that defines what it names.

    A path starts at `crate`, `super` (repeatable), `self`, a child module of the module it is
    written in (a bare child path: `bar::X` in `foo/mod.rs` is `foo::bar::X`) or a name the
    module imported with `use`. It resolves to the longest module prefix that exists; when the
    next segment is a name that module imports (`pub use location::Location;` in `store/mod.rs`),
    the path goes on through that import, so `crate::store::Location` names `store::location`:
    a facade's re-export is where the item lives, and the facade itself depends on its child.
    """

    def __init__(self, texts: dict[str, str]):
        self.modules = set(texts)
        self.imports: dict[str, dict[str, list[str]]] = {}
        for module, text in texts.items():
            bound: dict[str, list[str]] = {}
            for m in USE.finditer(text):
                for path, name in expand_use(m.group(1)):
                    if name != "*" and name != "_":
                        bound[name] = path
            self.imports[module] = bound

    def children(self, module: str) -> set[str]:
        prefix = module + "::" if module != "lib" else ""
        return {m[len(prefix) :].split("::")[0] for m in self.modules if m.startswith(prefix) and m != module}

    def absolute(self, module: str, path: list[str], depth: int = 0) -> list[str] | None:
        """`path`, written in `module`, from the crate root; None for an external crate, a
        local item or a primitive."""
        own = [] if module == "lib" else module.split("::")
        if not path:
            return None
        head, tail = path[0], path[1:]
        if head == "crate":
            return tail
        if head == "self":
            return own + tail
        if head == "super":  # the parent module, whether the module is `x.rs` or `x/mod.rs`
            base = own[:-1]
            while tail and tail[0] == "super":
                base, tail = base[:-1], tail[1:]
            return base + tail
        if head in self.children(module):
            return own + path
        bound = self.imports.get(module, {}).get(head)
        if bound is not None and depth < 8 and bound[0] != head:
            target = self.absolute(module, bound, depth + 1)
            return None if target is None else target + tail
        return None

    def module_of(self, full: list[str], depth: int = 0) -> str | None:
        """The module defining what the absolute path `full` names, through re-exports."""
        for n in range(len(full), 0, -1):
            candidate = "::".join(full[:n])
            if candidate in self.modules:
                rest = full[n:]
                if rest and depth < 8 and rest[0] in self.imports.get(candidate, {}):
                    target = self.absolute(candidate, self.imports[candidate][rest[0]])
                    if target is not None:
                        inner = self.module_of(target + rest[1:], depth + 1)
                        if inner is not None:
                            return inner
                return candidate
        return None


def references(module: str, text: str, resolver: Resolver) -> dict[str, str]:
    """The modules `module`'s code names, each with the first path that names it. A `use` of a
    whole module is not itself a reference; the paths through the name it binds are."""
    out: dict[str, str] = {}

    def add(full: list[str] | None, written: str, whole_module_ok: bool = True) -> None:
        if full is None:
            return
        target = resolver.module_of(full)
        if target is None or target == module:
            return
        if not whole_module_ok and "::".join(full) == target:
            return
        out.setdefault(target, written)

    for m in USE.finditer(text):
        for path, _name in expand_use(m.group(1)):
            add(resolver.absolute(module, path), "use " + "::".join(path), whole_module_ok=False)
    code = USE.sub(" ", text)
    for m in PATH.finditer(code):
        path = [p.strip() for p in (m.group(1) + m.group(2)).split("::")]
        add(resolver.absolute(module, path), "::".join(path))
    return out


def graph() -> dict[str, dict[str, str]]:
    files = sorted(SRC.rglob("*.rs"))
    texts = {module_of(f): source_without_tests(f) for f in files}
    resolver = Resolver(texts)
    return {m: references(m, text, resolver) for m, text in texts.items()}


def layer(module: str) -> int:
    parts = module.split("::")
    for n in range(len(parts), 0, -1):
        if "::".join(parts[:n]) in LAYERS:
            return LAYERS["::".join(parts[:n])]
    raise KeyError(f"module {module} has no layer in scripts/module_graph.py LAYERS")


def cycles(deps: dict[str, dict[str, str]]) -> list[list[str]]:
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


def a_cycle(deps: dict[str, dict[str, str]], component: list[str]) -> list[str]:
    """A shortest cycle through the component's first module, inside the component."""
    start, inside = component[0], set(component)
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for v in frontier:
            for w in sorted(deps[v]):
                if w not in inside:
                    continue
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [start] + path[::-1][1:] + [start] if len(path) > 1 else [start, v, start]
                if w not in previous:
                    previous[w] = v
                    following.append(w)
        frontier = following
    return component


def layers_in_crate_doc() -> list[list[str]]:
    """The layer chain the crate doc's Layout section opens with, lowest first: in its first
    paragraph, from the colon before the first `→` to the sentence's end, the backticked names of
    each group between arrows."""
    text = (SRC / "lib.rs").read_text()
    section = text[text.index("//! ## Layout") :]
    paragraph = []
    for line in section.splitlines()[2:]:
        line = line.removeprefix("//!").strip()
        if not line:
            break
        paragraph.append(line)
    text = " ".join(paragraph)
    first, last = text.index("→"), text.rindex("→")
    start = [m.end() for m in re.finditer(r":\s", text[:first])][-1]
    end = text.find(". ", last)
    chain = text[start : end if end >= 0 else len(text)]
    return [re.findall(r"`([a-z_]+)`", group) for group in chain.split("→")]


def doc_problems() -> list[str]:
    """Where LAYERS and the crate doc's layer chain disagree, and LAYERS entries naming no module."""
    problems = []
    chain = layers_in_crate_doc()
    documented = {name: rank for rank, group in enumerate(chain) for name in group}
    listed = {name for name in LAYERS if name not in ("lib", "fuzz")}  # the root; test builds' fuzzer
    tops = {module_of(f).split("::")[0] for f in SRC.rglob("*.rs")} - {"lib", "fuzz"}
    for name in sorted(listed - tops):
        problems.append(f"LAYERS names {name}, which is no top-level module")
    for name in sorted(tops - set(LAYERS)):
        problems.append(f"module {name} has no layer in LAYERS")
    for name in sorted(set(documented) ^ (listed & tops)):
        where = "the crate doc's layer chain" if name not in documented else "LAYERS"
        problems.append(f"{name} is missing from {where}")
    names = sorted(set(documented) & listed)
    for a in names:
        for b in names:
            if (documented[a] < documented[b]) != (LAYERS[a] < LAYERS[b]):
                problems.append(f"LAYERS orders {a} and {b} unlike the crate doc's layer chain")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail on a cycle or an upward import")
    args = parser.parse_args(argv)
    deps = graph()
    problems: list[str] = doc_problems()
    for component in cycles(deps):
        lines = ["cycle: " + " -> ".join(a_cycle(deps, component)), f"  its {len(component)} modules use each other:"]
        for module in component:
            for other, written in sorted(deps[module].items()):
                if other in component:
                    lines.append(f"    {module} -> {other}  ({written})")
        problems.append("\n".join(lines))
    for module, used in sorted(deps.items()):
        for other in sorted(used):
            if layer(other) > layer(module):
                problems.append(
                    f"upward import: {module} (layer {layer(module)}) uses {other} (layer {layer(other)})  ({used[other]})"
                )
    if not args.check:
        for module, used in sorted(deps.items(), key=lambda kv: (layer(kv[0]), kv[0])):
            print(f"[{layer(module)}] {module} -> {', '.join(sorted(used)) or '-'}")
    for p in problems:
        print(p, file=sys.stderr)
    if args.check and not problems:
        print(f"module graph: {len(deps)} modules, no cycle, no upward import")
    elif problems:
        print(f"module graph: {len(problems)} problem(s) above, in {len(deps)} modules", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
