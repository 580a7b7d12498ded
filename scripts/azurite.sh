#!/usr/bin/env bash
# Installs Azurite (Microsoft's Azure Storage emulator, npm package `azurite`), which the Azure
# integration tests start on loopback, once, into a cache outside the repository:
#
#   ${LAKEHOUSE_CACHE:-$HOME/.cache/lakehouse}/npm/node_modules/.bin/azurite-blob
#
# Needs Node.js and the npm registry; a warm call does no work. Prints the azurite-blob path.
set -euo pipefail

AZURITE_VERSION="3.37.0"
CACHE="${LAKEHOUSE_CACHE:-$HOME/.cache/lakehouse}"
PREFIX="$CACHE/npm"
BIN="$PREFIX/node_modules/.bin/azurite-blob"
STAMP="$PREFIX/.azurite-$AZURITE_VERSION"

mkdir -p "$PREFIX"
exec 9>"$PREFIX/.lock"
flock 9
if [[ ! -x "$BIN" || ! -f "$STAMP" ]]; then
  echo "azurite: installing $AZURITE_VERSION into $PREFIX" >&2
  npm install --no-audit --no-fund --silent --prefix "$PREFIX" "azurite@$AZURITE_VERSION" >&2
  touch "$STAMP"
fi
echo "$BIN"
