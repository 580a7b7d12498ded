#!/usr/bin/env bash
# Builds the local S3-compatible server the integration tests start on loopback (versitygw,
# posix backend) and the tests' latency proxy (scripts/latency_proxy, stdlib Go), once, into a
# cache outside the repository:
#
#   ${LAKEHOUSE_CACHE:-$HOME/.cache/lakehouse}/bin/versitygw-v1.8.0
#   ${LAKEHOUSE_CACHE:-$HOME/.cache/lakehouse}/bin/latency_proxy-<sha256 of its source, 16 hex>
#
# versitygw is built from source with the Go module proxy (`go install ...@v1.8.0`); the module
# and build caches live under the same cache dir (go/mod, go/build), so a new machine needs only
# Go >= 1.25 and the proxy, and a warm call does no work. Idempotent and safe to run
# concurrently (flock).
#
# Usage: scripts/s3_server.sh [versitygw|latency-proxy|all]
#   versitygw (default)  build both, print the versitygw binary path
#   latency-proxy        build both, print the latency proxy binary path
#   all                  build both, print both paths (versitygw first)
# Logs go to stderr; stdout carries only the path(s).
set -euo pipefail

VERSITYGW_VERSION="v1.8.0"
VERSITYGW_PKG="github.com/versity/versitygw/cmd/versitygw"

what="${1:-versitygw}"
case "$what" in
  versitygw | latency-proxy | all) ;;
  *) echo "usage: $0 [versitygw|latency-proxy|all]" >&2; exit 2 ;;
esac

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PROXY_SRC="$SCRIPT_DIR/latency_proxy"
CACHE="${LAKEHOUSE_CACHE:-$HOME/.cache/lakehouse}"
BIN="$CACHE/bin"
VGW="$BIN/versitygw-$VERSITYGW_VERSION"

log() { echo "s3_server: $*" >&2; }

command -v go >/dev/null 2>&1 || { log "go not found on PATH (need Go >= 1.25)"; exit 1; }

mkdir -p "$BIN" "$CACHE/go/mod" "$CACHE/go/build"
export GOMODCACHE="$CACHE/go/mod"
export GOCACHE="$CACHE/go/build"
export GOPATH="$CACHE/go/path"
export GOFLAGS="-buildvcs=false"   # ignore a caller's -mod=vendor etc.
export GOPROXY="${GOPROXY:-https://proxy.golang.org,direct}"
export CGO_ENABLED="${CGO_ENABLED:-0}"

exec 9>"$CACHE/.s3_server.lock"
flock 9

if [[ -x "$VGW" ]]; then
  log "versitygw $VERSITYGW_VERSION present: $VGW"
else
  log "building versitygw $VERSITYGW_VERSION from the Go module proxy (a cold build takes ~1.5 min)"
  tmp="$(mktemp -d "$BIN/.versitygw.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  GOBIN="$tmp" go install -trimpath \
    -ldflags "-s -w -X main.Version=$VERSITYGW_VERSION" \
    "$VERSITYGW_PKG@$VERSITYGW_VERSION" >&2
  mv -f "$tmp/versitygw" "$VGW"
  rm -rf "$tmp"
  trap - EXIT
  log "built $VGW"
fi

hash="$(cat "$PROXY_SRC/go.mod" "$PROXY_SRC/main.go" | sha256sum | cut -c1-16)"
PROXY="$BIN/latency_proxy-$hash"
if [[ -x "$PROXY" ]]; then
  log "latency proxy present: $PROXY"
else
  log "building latency proxy from $PROXY_SRC"
  tmpbin="$BIN/.latency_proxy.$$"
  (cd "$PROXY_SRC" && go build -trimpath -o "$tmpbin" .) >&2
  mv -f "$tmpbin" "$PROXY"
  log "built $PROXY"
fi

case "$what" in
  versitygw) echo "$VGW" ;;
  latency-proxy) echo "$PROXY" ;;
  all) echo "$VGW"; echo "$PROXY" ;;
esac
