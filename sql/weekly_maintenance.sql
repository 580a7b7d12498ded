-- The weekly lakehouse maintenance sweep (the reference flow's Sunday 02:00 schedule).
-- Shipped disabled: nothing runs it until you install the crontab line or the systemd timer of
-- docs/scheduling.md. `make deploy` installs it to /opt/lakehouse/sql/; run it by hand with
--   /opt/lakehouse/bin/duckdb -unsigned -f /opt/lakehouse/sql/weekly_maintenance.sql
-- No database file: every run is recorded as one Parquet file in /var/lib/lakehouse/history,
-- beside the webhook server's (sql/webhook_serve.sql), so both run on one machine at once.
-- The Slack webhook comes from SLACK_WEBHOOK_URL; without it the runs are only recorded.
-- Edit the table list below.

LOAD '/opt/lakehouse/lakehouse.duckdb_extension';

-- One gate per table: profile, compact degraded partitions, expire snapshots past 7 days,
-- post the scorecard, record the run. A failing table posts its alert, records the failed run
-- and stops the script (duckdb -f stops at the first error), so the failure is never silent.
SELECT table_name, partition, verdict, action, measured_speedup, snapshots_expired, notification
FROM lakehouse_gate('analytics.events_lakehouse',
                    small_file_threshold_mb := 64,
                    fragmentation_ratio_threshold := 0.35,
                    snapshot_retention_days := 7,
                    target_file_size_mb := 128,
                    history_path := '/var/lib/lakehouse/history');

-- Orphan files (crashed writers): listed, not deleted; switch dry_run off once you trust it.
SELECT path, size_bytes, action FROM lakehouse_remove_orphan_files('analytics.events_lakehouse', older_than_days := 3);

-- The last runs of every table, the webhook server's included (dry runs left out).
SELECT started_at::DATE AS day, table_name, status, max(small_files_eliminated) AS small_files_eliminated,
       max(volume_consolidated_mb) AS mb_consolidated, max(measured_speedup) AS speedup,
       max(snapshots_expired) AS expired, any_value(error) AS error
FROM read_parquet('/var/lib/lakehouse/history/*.parquet', union_by_name := true)
WHERE NOT dry_run
GROUP BY execution_id, day, table_name, status ORDER BY day DESC, table_name LIMIT 20;
