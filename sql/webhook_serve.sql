-- The event-driven gate: serves the authenticated webhook (POST /v1/tables/{table}/gate) until
-- SIGTERM, Ctrl-C or the end of the process that started it, then prints one row per run. Run
-- by sql/systemd/lakehouse-webhook.service (`make deploy` installs both under /opt/lakehouse).
-- The key comes from LAKEHOUSE_WEBHOOK_KEY (never from SQL); Slack from SLACK_WEBHOOK_URL.
-- No database file: every run is recorded as one Parquet file in /var/lib/lakehouse/history,
-- beside the weekly job's, so both run on one machine at once.
-- Edit the tables a CDC pipeline may trigger; a trigger can name nothing else.
-- Behind a proxy every connection is the proxy's: one address may hold a quarter of the
-- connections (max_connections_per_peer := 16 of max_connections := 64); raise it there.
LOAD '/opt/lakehouse/lakehouse.duckdb_extension';
CALL lakehouse_serve(
    listen := '127.0.0.1:8787',              -- loopback: put a TLS-terminating proxy in front
    tables := ['analytics.events_lakehouse'],
    small_file_threshold_mb := 64,
    fragmentation_ratio_threshold := 0.35,
    target_file_size_mb := 128,
    snapshot_retention_days := 7,
    history_path := '/var/lib/lakehouse/history');
