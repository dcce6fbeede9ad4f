-- Per GPU held by a run and minute: utilization, power against its limit and against the GPU's own
-- trailing power while running, and tensor-pipe activity, from $lookback_minutes before the
-- partition to $end (`in_window` marks the partition's minutes). The detector groups by run.
SELECT host, gpu_index, minute,
       minute + INTERVAL 1 MINUTE AS tick,
       minute + INTERVAL 1 MINUTE > $start AS in_window,
       run_id, samples, utilization_ratio, power_watts, power_limit_watts, power_watts_baseline,
       tensor_active_ratio, sm_active_ratio
FROM gpu_minutes
WHERE run_id IS NOT NULL
  AND minute >= $start - to_minutes(CAST($lookback_minutes AS INTEGER)) AND minute < $end
ORDER BY run_id, minute, host, gpu_index;
