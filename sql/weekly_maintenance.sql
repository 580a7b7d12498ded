-- The weekly lakehouse maintenance sweep (the reference flow's Sunday 02:00 schedule).
-- Shipped disabled: nothing runs it until you install the crontab line or systemd timer from the
-- docs/scheduling.md. Run it by hand with
--   duckdb -unsigned /var/lib/lakehouse/runs.duckdb -f sql/weekly_maintenance.sql
-- (a file database keeps the history table between runs). The Slack webhook comes from the
-- SLACK_WEBHOOK_URL environment variable; without it the scorecards are only stored.
-- Edit the extension path and the table list below.

LOAD 'build/release/lakehouse.duckdb_extension';

-- One gate per table: profile, compact degraded partitions, expire snapshots past 7 days,
-- post the scorecard, append it to lakehouse_runs. A failing table posts its alert and stops
-- the script (duckdb -f stops at the first error), so the failure is never silent.
SELECT table_name, partition, verdict, action, measured_speedup, snapshots_expired, notification
FROM lakehouse_gate('analytics.events_lakehouse',
                    small_file_threshold_mb := 64,
                    fragmentation_ratio_threshold := 0.35,
                    snapshot_retention_days := 7,
                    target_file_size_mb := 128,
                    history_table := 'lakehouse_runs');

-- Orphan files (crashed writers): listed, not deleted; switch dry_run off once you trust it.
SELECT path, size_bytes, action FROM lakehouse_remove_orphan_files('analytics.events_lakehouse', older_than_days := 3);

-- The trend of the last runs.
SELECT started_at::DATE AS day, table_name, status, max(small_files_eliminated) AS small_files_eliminated,
       max(volume_consolidated_mb) AS mb_consolidated, max(measured_speedup) AS speedup, max(snapshots_expired) AS expired
FROM lakehouse_runs GROUP BY ALL ORDER BY day DESC LIMIT 20;
