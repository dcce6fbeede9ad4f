-- Replace one hour of gpu_minutes: per GPU and minute, its samples summarised (counters as max,
-- throttle reasons OR-ed), and its own trailing $window_minutes clock and power baselines while a
-- run held it.
-- [$from, $end): the whole hour, or from the first minute whose inputs changed (a live run); the rows
-- are read from $read_from, the lookback of $from's trailing window (assets/baselines.py series_params).
-- The shard markers are empty, or for a shard's partition its hosts' rows only (assets/baselines.py replace_shard_series).
DELETE FROM gpu_minutes WHERE minute >= $from AND minute < $end /*@shard*/;
INSERT INTO gpu_minutes BY NAME
WITH per_minute AS (
    SELECT host, gpu_index,
           any_value(gpu_uuid) AS gpu_uuid,
           time_bucket(INTERVAL 1 MINUTE, time) AS minute,
           mode(run_id) AS run_id,
           count(*) AS samples,
           avg(utilization_ratio) AS utilization_ratio,
           avg(power_watts) AS power_watts,
           max(power_limit_watts) AS power_limit_watts,
           max(temperature_celsius) AS temperature_celsius,
           median(sm_clock_hertz) AS sm_clock_hertz,
           bit_or(throttle_reasons) AS throttle_reasons,
           max(memory_used_bytes) AS memory_used_bytes,
           avg(sm_active_ratio) AS sm_active_ratio,
           avg(tensor_active_ratio) AS tensor_active_ratio,
           max(ecc_corrected_errors_total) AS ecc_corrected_errors_total,
           max(ecc_uncorrected_errors_total) AS ecc_uncorrected_errors_total,
           max(xid_errors_total) AS xid_errors_total,
           arg_max(last_xid, time) FILTER (WHERE last_xid IS NOT NULL) AS last_xid,
           max(remapped_rows_uncorrectable_total) AS remapped_rows_uncorrectable_total,
           bool_or(row_remap_pending) AS row_remap_pending,
           bool_or(row_remap_failure) AS row_remap_failure
    FROM gpu_samples
    WHERE time >= $read_from AND time < $end /*@shard*/
    GROUP BY ALL
)
SELECT *,
       median(sm_clock_hertz) FILTER (WHERE run_id IS NOT NULL) OVER w AS sm_clock_baseline,
       median(power_watts) FILTER (WHERE run_id IS NOT NULL) OVER w AS power_watts_baseline,
       $window_minutes AS baseline_window_minutes,
       count(*) OVER w AS baseline_minutes
FROM per_minute
WINDOW w AS (PARTITION BY host, gpu_index ORDER BY minute
             RANGE BETWEEN to_minutes($window_minutes) PRECEDING AND INTERVAL 1 MINUTE PRECEDING)
QUALIFY minute >= $from
ORDER BY host, gpu_index, minute;
SELECT count(*) FROM gpu_minutes WHERE minute >= $start AND minute < $end /*@shard*/;
