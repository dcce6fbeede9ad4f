-- Clock, throttle reasons and load per GPU and minute, with the GPU's own trailing SM-clock
-- baseline while held by a run (gpu_minutes), from $lookback_minutes before the partition to $end;
-- `in_window` marks the partition's minutes. Shared by the thermal and power throttle signals.
SELECT host, gpu_index, gpu_uuid, minute,
       minute + INTERVAL 1 MINUTE AS tick,
       minute + INTERVAL 1 MINUTE > $start AS in_window,
       run_id, samples, utilization_ratio, throttle_reasons, sm_clock_hertz, sm_clock_baseline,
       baseline_minutes, temperature_celsius, power_watts, power_limit_watts
FROM gpu_minutes
WHERE minute >= $start - to_minutes(CAST($lookback_minutes AS INTEGER)) AND minute < $end
ORDER BY host, gpu_index, minute;
