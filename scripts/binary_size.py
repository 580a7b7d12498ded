"""What the release binary weighs and what pulls the weight in (`make size`).

Reads the release library cargo built (symbols kept, `strip = "debuginfo"`), measures it, a copy
stripped of its symbol table (`strip --strip-all`, what `strip = "symbols"` gives) and that copy
gzipped (what an extension repository may serve), and sums the code and data of its symbols by
the crate their demangled path starts with — what `cargo bloat --crates` reports, from the
binary already built instead of a build of its own. Writes Markdown to stdout.

Usage: ``python scripts/binary_size.py <path to liblakehouse.so> [--top 25]``
"""

from __future__ import annotations

import argparse
import gzip
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path


def crate_of(symbol: str) -> str:
    """The crate a demangled Rust symbol belongs to (`<impl …>` and `<T as …>` by their type's
    crate; a generic of the standard library, `core::ptr::drop_in_place<parquet::…>`, by its
    first type argument's, which is what instantiated it); C and C++ symbols as one row."""
    text = symbol.lstrip("<&*")
    text = re.sub(r"^(dyn |impl |mut |const )", "", text)
    match = re.match(r"([A-Za-z_][A-Za-z0-9_]*)::", text)
    if not match:
        return "[C/C++ or unnamed]"
    crate = match.group(1)
    if crate in ("core", "alloc", "std") and "<" in text:
        inner = crate_of(text[text.index("<") + 1 :])
        if inner not in ("core", "alloc", "std", "[C/C++ or unnamed]"):
            return inner
    return crate


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("library", type=Path)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    built = args.library.stat().st_size
    with tempfile.TemporaryDirectory() as tmp:
        stripped_path = Path(tmp) / "stripped.so"
        shutil.copyfile(args.library, stripped_path)
        subprocess.run(["strip", "--strip-all", str(stripped_path)], check=True)
        stripped = stripped_path.stat().st_size
        gzipped = len(gzip.compress(stripped_path.read_bytes(), compresslevel=9))
    listing = subprocess.run(["nm", "-C", "--size-sort", "--print-size", str(args.library)], capture_output=True,
                             text=True, check=True).stdout
    by_crate: Counter[str] = Counter()
    for line in listing.splitlines():
        parts = line.split(maxsplit=3)
        if len(parts) == 4 and parts[2].lower() in ("t", "d", "r", "b", "w", "v"):
            by_crate[crate_of(parts[3])] += int(parts[1], 16)
    total = sum(by_crate.values())
    mib = lambda n: f"{n / 1048576:.1f} MiB"  # noqa: E731
    has_symbols = bool(subprocess.run(["nm", str(args.library)], capture_output=True, text=True).stdout.strip())
    print(f"- built: {mib(built)} ({'symbols kept' if has_symbols else 'no symbol table'})")
    print(f"- without its symbol table (`strip = \"symbols\"`, Cargo.toml's release setting): {mib(stripped)}")
    print(f"- stripped and gzipped (as an extension repository may serve it): {mib(gzipped)}\n")
    print(f"Code and data by crate (symbol sizes, {mib(total)} in all; the top {args.top}):\n")
    print("| crate | size | share |")
    print("|---|---|---|")
    for crate, size in by_crate.most_common(args.top):
        print(f"| {crate} | {mib(size)} | {100 * size / max(total, 1):.1f} % |")
    if not has_symbols:
        print("\n(No symbol table: build with `strip = \"debuginfo\"` to see what makes it up.)")
    print(
        "\nThe weight is in the formats' libraries — Arrow and Parquet (delta-kernel, delta-rs and "
        "iceberg-rust read and write through them; brotli and the other codecs come with the parquet "
        "features those crates turn on), Tokio and the HTTP and TLS stack (object stores, catalogs, "
        "Slack) — not in unused code of ours. `lto = \"fat\"` with one codegen unit would trim more "
        "for a much longer release build; `panic = \"abort\"` is not an option (panics are caught at "
        "the FFI boundary). The metadata footer DuckDB reads adds 534 bytes."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
