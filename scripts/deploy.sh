#!/bin/sh
# Installs what the scheduled and event-driven gates run (docs/scheduling.md, `make deploy`):
#   $PREFIX/bin/duckdb                  the DuckDB CLI binary itself (not pip's Python wrapper)
#   $PREFIX/lakehouse.duckdb_extension  the extension (EXTENSION, default the release build)
#   $PREFIX/sql/*.sql                   the weekly sweep and the webhook server
#   $PREFIX/systemd/*                   the units, to copy into /etc/systemd/system
#   $STATE/history                      the run history, one Parquet file per run
#   $LOGS                               the cron job's log
# Defaults: PREFIX=/opt/lakehouse STATE=/var/lib/lakehouse CONF=/etc/lakehouse LOGS=/var/log/lakehouse
# (run as root; with OWNER=lakehouse, $STATE and $LOGS are given to that user). Other
# directories are written into the installed SQL and units in place of the defaults. The
# environment file $CONF/env (LAKEHOUSE_WEBHOOK_KEY=…, SLACK_WEBHOOK_URL=…, mode 0600) is
# the operator's: it is never written here.
set -eu
cd "$(dirname "$0")/.."
PREFIX=${PREFIX:-/opt/lakehouse}
STATE=${STATE:-/var/lib/lakehouse}
CONF=${CONF:-/etc/lakehouse}
LOGS=${LOGS:-/var/log/lakehouse}
EXTENSION=${EXTENSION:-build/release/lakehouse.duckdb_extension}
VENV=${VENV:-.venv}
if [ -z "${DUCKDB_BINARY:-}" ]; then
    # pip's `duckdb` command is a Python wrapper that starts this binary as its child.
    DUCKDB_BINARY=$("$VENV/bin/python" -c 'import duckdb_cli, os; print(os.path.join(os.path.dirname(duckdb_cli.__file__), "duckdb"))')
fi
for f in "$EXTENSION" "$DUCKDB_BINARY"; do
    [ -f "$f" ] || { echo "deploy: $f does not exist (make release; make venv)" >&2; exit 1; }
done
place() {  # place SOURCE TARGET MODE: a copy with the default directories replaced
    sed -e "s|/opt/lakehouse|$PREFIX|g" -e "s|/var/lib/lakehouse|$STATE|g" \
        -e "s|/etc/lakehouse|$CONF|g" -e "s|/var/log/lakehouse|$LOGS|g" "$1" > "$2.tmp"
    chmod "$3" "$2.tmp"
    mv "$2.tmp" "$2"
}
mkdir -p "$PREFIX/bin" "$PREFIX/sql" "$PREFIX/systemd" "$STATE/history" "$LOGS"
cp "$DUCKDB_BINARY" "$PREFIX/bin/duckdb.tmp" && chmod 0755 "$PREFIX/bin/duckdb.tmp" && mv "$PREFIX/bin/duckdb.tmp" "$PREFIX/bin/duckdb"
cp "$EXTENSION" "$PREFIX/lakehouse.duckdb_extension.tmp" && mv "$PREFIX/lakehouse.duckdb_extension.tmp" "$PREFIX/lakehouse.duckdb_extension"
for f in weekly_maintenance.sql webhook_serve.sql; do place "sql/$f" "$PREFIX/sql/$f" 0644; done
for f in sql/systemd/*.service sql/systemd/*.timer; do place "$f" "$PREFIX/systemd/$(basename "$f")" 0644; done
if [ -n "${OWNER:-}" ]; then chown -R "$OWNER" "$STATE" "$LOGS"; fi
echo "deployed to $PREFIX (history in $STATE/history); units in $PREFIX/systemd"
