-- Per rank and minute, from $lookback_minutes before the partition to $end (`in_window` marks the
-- partition's minutes): the rank's compute and collective time with its own trailing baseline
-- (rank_minutes), and what the GPU under it reported that minute (gpu_minutes): the cross-layer
-- evidence a straggler finding cites. Peer medians are taken by the detector, the rank left out; a
-- record without the compute breakdown is judged on its step less its data time.
SELECT r.run_id, r.rank, r.run_id || '/rank-' || r.rank AS entity_id, r.host, r.gpu_index, r.minute,
       r.minute + INTERVAL 1 MINUTE AS tick,
       r.minute + INTERVAL 1 MINUTE > $start AS in_window,
       r.steps_completed, r.step_seconds, r.data_seconds, r.compute_seconds, r.collective_seconds,
       r.compute_seconds_baseline, r.compute_seconds_mad, r.baseline_minutes,
       g.temperature_celsius AS gpu_temperature_celsius,
       g.throttle_reasons AS gpu_throttle_reasons,
       g.sm_clock_hertz AS gpu_sm_clock_hertz,
       g.sm_clock_baseline AS gpu_sm_clock_baseline,
       g.power_watts AS gpu_power_watts,
       g.power_limit_watts AS gpu_power_limit_watts,
       g.last_xid AS gpu_last_xid,
       g.utilization_ratio AS gpu_utilization
FROM rank_minutes r
LEFT JOIN gpu_minutes g ON g.host = r.host AND g.gpu_index = r.gpu_index AND g.minute = r.minute
WHERE r.minute >= $start - to_minutes(CAST($lookback_minutes AS INTEGER)) AND r.minute < $end
ORDER BY r.run_id, r.rank, r.minute;
