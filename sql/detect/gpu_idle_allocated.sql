-- Per GPU held by a run and minute: its utilization and the mean utilization of the run's other
-- held GPUs that minute, from $lookback_minutes before the partition to $end (`in_window` marks
-- the partition's minutes). GPUs held by no run are idle between runs and are not in the series.
SELECT host, gpu_index, gpu_uuid, minute,
       minute + INTERVAL 1 MINUTE AS tick,
       minute + INTERVAL 1 MINUTE > $start AS in_window,
       run_id, samples, utilization_ratio, memory_used_bytes, power_watts,
       count(*) OVER peers - 1 AS other_gpus,
       (sum(utilization_ratio) OVER peers - utilization_ratio) / nullif(count(utilization_ratio) OVER peers - 1, 0)
           AS others_utilization
FROM gpu_minutes
WHERE run_id IS NOT NULL
  AND minute >= $start - to_minutes(CAST($lookback_minutes AS INTEGER)) AND minute < $end
WINDOW peers AS (PARTITION BY run_id, minute)
ORDER BY host, gpu_index, minute;
