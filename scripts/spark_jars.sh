#!/usr/bin/env bash
# Downloads the jars the Spark tests (test/integration/test_spark_conformance.py, test_delta.py)
# put on Spark's classpath, once, into a cache outside the repository:
#
#   ${LAKEHOUSE_JAR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/lakehouse/jars}/<artifact>-<version>.jar
#
# Idempotent: a jar already there whose SHA-1 matches Maven Central's .sha1 (or, offline, the
# SHA-1 recorded next to it at download time) is not fetched again. Tries Maven first
# (`mvn dependency:copy`), then curl from repo1.maven.org. Prints the cache directory.
# The tests never resolve anything at run time: the SparkSession gets `spark.jars=<local path>`.
set -euo pipefail

CACHE="${LAKEHOUSE_JAR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/lakehouse/jars}"
REPO_URL="${LAKEHOUSE_MAVEN_REPO:-https://repo1.maven.org/maven2}"

# group:artifact:version — keep in step with SPARK_JARS in test/integration/spark.py.
ARTIFACTS=(
  "org.apache.iceberg:iceberg-spark-runtime-4.0_2.13:1.10.1"
  "org.xerial:sqlite-jdbc:3.50.3.0"
  # Delta Lake's Spark connector for Spark 4.0 / Scala 2.13 (test_delta.py: Spark writes and reads
  # Delta tables by path in the same session); its one dependency Spark does not ship.
  "io.delta:delta-spark_2.13:4.0.0"
  "io.delta:delta-storage:4.0.0"
  # Iceberg's S3FileIO with the AWS SDK it needs (test_object_storage.py: Spark on S3 through a
  # REST catalog).
  "org.apache.iceberg:iceberg-aws-bundle:1.10.1"
)

mkdir -p "$CACHE"

sha1_of() { sha1sum "$1" | cut -d' ' -f1; }

# The expected SHA-1 of a jar: Maven Central's .sha1, cached as <jar>.sha1 (so a re-run offline
# still verifies against the value fetched the first time).
expected_sha1() {
  local url="$1" record="$2" value
  if value=$(curl -fsSL --retry 3 --max-time 60 "$url.sha1" 2>/dev/null); then
    value=$(printf '%s' "$value" | tr -d '[:space:]' | cut -c1-40)
    if [[ "$value" =~ ^[0-9a-f]{40}$ ]]; then
      printf '%s\n' "$value" >"$record.tmp" && mv "$record.tmp" "$record"
      printf '%s' "$value"
      return 0
    fi
  fi
  if [[ -s "$record" ]]; then
    tr -d '[:space:]' <"$record"
    return 0
  fi
  return 1
}

for coordinate in "${ARTIFACTS[@]}"; do
  IFS=: read -r group artifact version <<<"$coordinate"
  jar="$CACHE/$artifact-$version.jar"
  url="$REPO_URL/${group//.//}/$artifact/$version/$artifact-$version.jar"

  if [[ -s "$jar" && -s "$jar.sha1" ]] && [[ "$(sha1_of "$jar")" == "$(tr -d '[:space:]' <"$jar.sha1")" ]]; then
    echo "spark_jars: $artifact-$version.jar present and verified" >&2
    continue
  fi

  expected=$(expected_sha1 "$url" "$jar.sha1") || {
    echo "spark_jars: cannot fetch $url.sha1 (no network?) and no recorded checksum" >&2
    exit 1
  }

  if [[ -s "$jar" && "$(sha1_of "$jar")" == "$expected" ]]; then
    echo "spark_jars: $artifact-$version.jar present and verified" >&2
    continue
  fi

  rm -f "$jar"
  tmpdir=$(mktemp -d "$CACHE/.download.XXXXXX")
  trap 'rm -rf "$tmpdir"' EXIT
  echo "spark_jars: downloading $coordinate" >&2
  if command -v mvn >/dev/null 2>&1 &&
    mvn -q -B -Dstyle.color=never org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy \
      -Dartifact="$group:$artifact:$version:jar" -DoutputDirectory="$tmpdir" \
      -Dmdep.overWriteReleases=true >"$tmpdir/mvn.log" 2>&1 &&
    [[ -s "$tmpdir/$artifact-$version.jar" ]]; then
    :
  else
    [[ -s "$tmpdir/mvn.log" ]] && sed 's/\x1b\[[0-9;]*m//g' "$tmpdir/mvn.log" | tail -20 >&2
    echo "spark_jars: mvn failed or unavailable, falling back to curl $url" >&2
    curl -fsSL --retry 3 --max-time 900 -o "$tmpdir/$artifact-$version.jar" "$url"
  fi
  actual=$(sha1_of "$tmpdir/$artifact-$version.jar")
  if [[ "$actual" != "$expected" ]]; then
    echo "spark_jars: SHA-1 mismatch for $artifact-$version.jar: got $actual, Maven Central says $expected" >&2
    exit 1
  fi
  mv "$tmpdir/$artifact-$version.jar" "$jar"
  rm -rf "$tmpdir"
  trap - EXIT
  echo "spark_jars: $jar" >&2
done

echo "$CACHE"
