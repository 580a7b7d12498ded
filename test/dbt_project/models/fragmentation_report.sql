-- The table's fragmentation profile as a model; after it builds, the post-hook runs the gate.
{{ config(
    materialized='table',
    pre_hook="LOAD '" ~ env_var('LAKEHOUSE_EXTENSION') ~ "'",
    post_hook=lakehouse_gate(env_var('LAKEHOUSE_TABLE'),
                             small_file_threshold_mb=0.064,
                             target_file_size_mb=0.128)
) }}
SELECT partition, total_files, small_files, fragmentation_ratio, requires_compaction
FROM lakehouse_fragmentation('{{ env_var("LAKEHOUSE_TABLE") }}', small_file_threshold_mb := 0.064)
