#!/usr/bin/env python3
"""Turn a cdylib into a loadable `.duckdb_extension` by appending DuckDB's metadata footer.

The footer is 534 bytes: a WebAssembly custom-section header named `duckdb_signature` (22 bytes),
eight 32-byte fields written last-to-first, and a 256-byte signature (zeros: the extension is
unsigned, so DuckDB must be started with `-unsigned` / `allow_unsigned_extensions`).

Field 1 is the magic "4", 2 the platform, 3 the DuckDB (for the C_STRUCT ABI: C API) version the
extension was built against, 4 the extension version, 5 the ABI type; 6 to 8 are unused.
"""
import argparse
import platform
import shutil
import sys


def field(text: str) -> bytes:
    raw = text.encode("ascii")
    if len(raw) > 32:
        sys.exit(f"append_extension_metadata: field '{text}' is longer than 32 bytes")
    return raw.ljust(32, b"\x00")


def default_platform() -> str:
    machine = platform.machine().lower()
    arch = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}.get(machine, machine)
    system = platform.system().lower()
    return f"{'osx' if system == 'darwin' else system}_{arch}"


def footer(platform_name: str, capi_version: str, extension_version: str, abi_type: str) -> bytes:
    header = b"\x00" + b"\x93\x04" + b"\x10" + b"duckdb_signature" + b"\x80\x04"
    fields = [b"\x00" * 32] * 3 + [
        field(abi_type),
        field(extension_version),
        field(capi_version),
        field(platform_name),
        field("4"),
    ]
    out = header + b"".join(fields) + b"\x00" * 256
    assert len(out) == 534, len(out)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("library", help="the built shared library (liblakehouse.so)")
    parser.add_argument("output", help="where to write the .duckdb_extension")
    parser.add_argument("--platform", default=default_platform())
    parser.add_argument("--capi-version", default="v1.2.0")
    parser.add_argument("--extension-version", default="v0.1.0")
    parser.add_argument("--abi-type", default="C_STRUCT")
    args = parser.parse_args()
    tmp = args.output + ".tmp"
    shutil.copyfile(args.library, tmp)
    with open(tmp, "ab") as f:
        f.write(footer(args.platform, args.capi_version, args.extension_version, args.abi_type))
    shutil.move(tmp, args.output)


if __name__ == "__main__":
    main()
