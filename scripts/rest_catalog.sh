#!/usr/bin/env bash
# Resolves Apache Iceberg's REST catalog test fixture (org.apache.iceberg:iceberg-open-api:1.10.1,
# classifier test-fixtures: org.apache.iceberg.rest.RESTCatalogServer) and its whole runtime
# classpath (scripts/rest_catalog/pom.xml) into a cache outside the repository:
#
#   ${LAKEHOUSE_JAR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/lakehouse/jars}/rest-1.10.1/*.jar
#
# and compiles scripts/rest_catalog/LoopbackRESTCatalogServer.java (the fixture's server bound to
# 127.0.0.1, port 0 allowed) into lakehouse-rest-launcher.jar there. The Maven local repository
# is <cache>/m2; Maven runs with strict checksums (-C: every download is checked against Maven
# Central's SHA-1). It also puts iceberg-aws-bundle-1.10.1.jar (+ .sha1) next to the Spark jars
# of scripts/spark_jars.sh (<cache>/iceberg-aws-bundle-1.10.1.jar): Spark's S3FileIO needs it.
#
# Idempotent and fast when warm: no Maven run when the directory's stamp matches the pom and the
# launcher source and every jar it lists is there. Safe to run concurrently (flock).
# Prints the classpath directory on stdout (use "<dir>/*" as java -cp); progress on stderr.
# Run the server: see test/integration/rest_catalog.py.
set -euo pipefail

ICEBERG_VERSION=1.10.1
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SRC="$HERE/rest_catalog"
CACHE="${LAKEHOUSE_JAR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/lakehouse/jars}"
DIR="$CACHE/rest-$ICEBERG_VERSION"
STAMP_FILE="$DIR/.complete"
M2="$CACHE/m2"
BUNDLE="iceberg-aws-bundle-$ICEBERG_VERSION.jar"
LAUNCHER_JAR="lakehouse-rest-launcher.jar"
MAVEN_DEPENDENCY_PLUGIN="org.apache.maven.plugins:maven-dependency-plugin:3.6.1"

log() { echo "rest_catalog: $*" >&2; }
sha1_of() { sha1sum "$1" | cut -d' ' -f1; }

stamp() { cat "$SRC/pom.xml" "$SRC/LoopbackRESTCatalogServer.java" | sha1sum | cut -d' ' -f1; }

# The cache is complete when its stamp (first line) matches and every jar listed after it exists.
complete() {
  [[ -s "$STAMP_FILE" ]] || return 1
  [[ "$(head -n1 "$STAMP_FILE")" == "$(stamp)" ]] || return 1
  local jar
  while IFS= read -r jar; do
    [[ -s "$DIR/$jar" ]] || return 1
  done < <(tail -n +2 "$STAMP_FILE")
  [[ -s "$CACHE/$BUNDLE" && -s "$CACHE/$BUNDLE.sha1" ]] || return 1
}

# Spark's copy of the AWS bundle, next to the jars of scripts/spark_jars.sh (hard link if possible).
place_bundle() {
  local recorded="$M2/org/apache/iceberg/iceberg-aws-bundle/$ICEBERG_VERSION/$BUNDLE.sha1"
  local expected actual
  expected=$(tr -d '[:space:]' <"$recorded" | cut -c1-40)
  actual=$(sha1_of "$DIR/$BUNDLE")
  if [[ "$actual" != "$expected" ]]; then
    log "SHA-1 mismatch for $BUNDLE: got $actual, Maven Central says $expected"
    exit 1
  fi
  ln -f "$DIR/$BUNDLE" "$CACHE/$BUNDLE.tmp" 2>/dev/null || cp "$DIR/$BUNDLE" "$CACHE/$BUNDLE.tmp"
  mv -f "$CACHE/$BUNDLE.tmp" "$CACHE/$BUNDLE"
  printf '%s\n' "$expected" >"$CACHE/$BUNDLE.sha1"
}

mkdir -p "$CACHE"
if complete; then
  echo "$DIR"
  exit 0
fi

exec 9>"$CACHE/.rest-$ICEBERG_VERSION.lock"
flock 9
if complete; then # another run finished it while we waited
  echo "$DIR"
  exit 0
fi

for tool in mvn javac jar; do
  command -v "$tool" >/dev/null 2>&1 || { log "$tool not found (need a JDK >= 11 and Maven)"; exit 1; }
done

tmp=$(mktemp -d "$CACHE/.rest-build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cp "$SRC/pom.xml" "$tmp/pom.xml"
log "resolving the Iceberg $ICEBERG_VERSION REST fixture's classpath with Maven (local repo $M2)"
if ! mvn -q -B -C -Dstyle.color=never -f "$tmp/pom.xml" -Dmaven.repo.local="$M2" \
  "$MAVEN_DEPENDENCY_PLUGIN:copy-dependencies" -DincludeScope=runtime \
  -DoutputDirectory="$tmp/lib" >"$tmp/mvn.log" 2>&1; then
  sed 's/\x1b\[[0-9;]*m//g' "$tmp/mvn.log" | tail -30 >&2
  log "mvn dependency:copy-dependencies failed"
  exit 1
fi
[[ -s "$tmp/lib/iceberg-open-api-$ICEBERG_VERSION-test-fixtures.jar" && -s "$tmp/lib/$BUNDLE" ]] || {
  log "Maven did not produce the fixture jar or $BUNDLE"
  exit 1
}

log "compiling LoopbackRESTCatalogServer"
mkdir -p "$tmp/classes"
javac -nowarn --release 11 -cp "$tmp/lib/*" -d "$tmp/classes" "$SRC/LoopbackRESTCatalogServer.java" >&2
jar cf "$tmp/lib/$LAUNCHER_JAR" -C "$tmp/classes" .

{
  stamp
  (cd "$tmp/lib" && ls -1 -- *.jar)
} >"$tmp/lib/.complete.tmp"
mv "$tmp/lib/.complete.tmp" "$tmp/lib/.complete"
rm -rf "$DIR"
mv "$tmp/lib" "$DIR"
place_bundle
log "$(ls "$DIR"/*.jar | wc -l) jars in $DIR; Spark's S3FileIO bundle: $CACHE/$BUNDLE"
echo "$DIR"
