{#-
  dbt post-hook macro: run the lakehouse maintenance gate on an Iceberg table after a model builds.

    {{ config(post_hook=["LOAD '/opt/lakehouse/lakehouse.duckdb_extension'",
                         lakehouse_gate('analytics.events_lakehouse')]) }}

  Needs `config_options: {allow_unsigned_extensions: true}` in the dbt-duckdb profile (the
  extension is unsigned). The Slack webhook is read by the extension from SLACK_WEBHOOK_URL:
  never pass it through SQL, which dbt writes to its logs. Every run, a failed one too, is
  appended to `history_table` (in dbt's database) and, with `history_path`, written as a Parquet
  file beside the weekly job's and the webhook server's (docs/scheduling.md).
-#}
{% macro lakehouse_gate(table,
                        small_file_threshold_mb=64,
                        fragmentation_ratio_threshold=0.35,
                        snapshot_retention_days=7,
                        target_file_size_mb=128,
                        dry_run=false,
                        history_table='lakehouse_runs',
                        history_path=none,
                        catalog_uri=none) -%}
  {%- set q = "'" -%}
  SELECT execution_id, partition, verdict, status, notification
  FROM lakehouse_gate({{ q ~ table | replace(q, q ~ q) ~ q }},
                      small_file_threshold_mb := {{ small_file_threshold_mb | float }},
                      fragmentation_ratio_threshold := {{ fragmentation_ratio_threshold | float }},
                      snapshot_retention_days := {{ snapshot_retention_days | float }},
                      target_file_size_mb := {{ target_file_size_mb | float }},
                      dry_run := {{ 'true' if dry_run else 'false' }},
                      history_table := {{ q ~ history_table | replace(q, q ~ q) ~ q }}
                      {%- if history_path %}, history_path := {{ q ~ history_path | replace(q, q ~ q) ~ q }}{% endif %}
                      {%- if catalog_uri %}, catalog_uri := {{ q ~ catalog_uri | replace(q, q ~ q) ~ q }}{% endif %})
{%- endmacro %}
