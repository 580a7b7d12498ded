#!/usr/bin/env bash
# Builds fake-gcs-server (Google Cloud Storage's JSON API, emulated; the GCS tests start it on
# loopback) once, from the Go module proxy, into a cache outside the repository:
#
#   ${LAKEHOUSE_CACHE:-$HOME/.cache/lakehouse}/bin/fake-gcs-server-v1.56.1
#
# The Go module and build caches live under the same cache dir, so a new machine needs only Go
# and the proxy, and a warm call does no work. Idempotent and safe to run concurrently (flock).
# Prints the binary's path on stdout; logs go to stderr.
set -euo pipefail

VERSION="v1.56.1"
PKG="github.com/fsouza/fake-gcs-server"
CACHE="${LAKEHOUSE_CACHE:-$HOME/.cache/lakehouse}"
BIN="$CACHE/bin"
TARGET="$BIN/fake-gcs-server-$VERSION"

log() { echo "fake_gcs: $*" >&2; }
command -v go >/dev/null 2>&1 || { log "go not found on PATH"; exit 1; }

mkdir -p "$BIN" "$CACHE/go/mod" "$CACHE/go/build"
export GOMODCACHE="$CACHE/go/mod"
export GOCACHE="$CACHE/go/build"
export GOPATH="$CACHE/go/path"
export GOFLAGS="-buildvcs=false"
export GOPROXY="${GOPROXY:-https://proxy.golang.org,direct}"
export CGO_ENABLED="${CGO_ENABLED:-0}"

exec 9>"$CACHE/.fake_gcs.lock"
flock 9

if [[ -x "$TARGET" ]]; then
  log "fake-gcs-server $VERSION present: $TARGET"
else
  log "building fake-gcs-server $VERSION from the Go module proxy (a cold build takes ~1 min)"
  tmp="$(mktemp -d "$BIN/.fake-gcs.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  GOBIN="$tmp" go install -trimpath -ldflags "-s -w" "$PKG@$VERSION" >&2
  mv -f "$tmp/fake-gcs-server" "$TARGET"
  rm -rf "$tmp"
  trap - EXIT
  log "built $TARGET"
fi
echo "$TARGET"
