-- ECC events per GPU and minute of [$start, $end): increases of the uncorrected and corrected error
-- counters and of the uncorrectable remapped rows over their previous readings (looking back
-- $lookback_minutes), and whether a row remap turned pending (false before, true now). Levels that
-- were already non-zero, or already pending, before the window do not count.
-- The lookback is read once, as each GPU's last reading of each counter before the window (`seed`,
-- one row just before $start), not as samples the window functions walk: the cost of a tick follows
-- the hour so far, and the previous readings are the same.
WITH seed AS (
    SELECT host, gpu_index, CAST($start AS TIMESTAMP) - INTERVAL 1 MICROSECOND AS time,
           arg_max(ecc_uncorrected_errors_total, time) FILTER (WHERE ecc_uncorrected_errors_total IS NOT NULL)
               AS ecc_uncorrected_errors_total,
           arg_max(ecc_corrected_errors_total, time) FILTER (WHERE ecc_corrected_errors_total IS NOT NULL)
               AS ecc_corrected_errors_total,
           arg_max(remapped_rows_uncorrectable_total, time) FILTER (WHERE remapped_rows_uncorrectable_total IS NOT NULL)
               AS remapped_rows_uncorrectable_total,
           arg_max(row_remap_pending, time) FILTER (WHERE row_remap_pending IS NOT NULL) AS row_remap_pending
    FROM gpu_samples
    WHERE time >= $start - to_minutes(CAST($lookback_minutes AS INTEGER)) AND time < $start
    GROUP BY host, gpu_index
), samples AS (
    SELECT host, gpu_index, gpu_uuid, time, run_id,
           ecc_uncorrected_errors_total, ecc_corrected_errors_total, remapped_rows_uncorrectable_total, row_remap_pending,
           row_remap_failure,
           last_value(ecc_uncorrected_errors_total IGNORE NULLS) OVER before AS prev_uncorrected,
           last_value(ecc_corrected_errors_total IGNORE NULLS) OVER before AS prev_corrected,
           last_value(remapped_rows_uncorrectable_total IGNORE NULLS) OVER before AS prev_remapped,
           last_value(row_remap_pending IGNORE NULLS) OVER before AS prev_pending
    FROM (SELECT host, gpu_index, gpu_uuid, time, run_id, ecc_uncorrected_errors_total, ecc_corrected_errors_total,
                 remapped_rows_uncorrectable_total, row_remap_pending, row_remap_failure
          FROM gpu_samples WHERE time >= $start AND time < $end
          UNION ALL BY NAME SELECT * FROM seed)
    WINDOW before AS (PARTITION BY host, gpu_index ORDER BY time ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
), events AS (
    SELECT *,
           CASE WHEN prev_uncorrected IS NULL OR ecc_uncorrected_errors_total IS NULL THEN 0
                WHEN ecc_uncorrected_errors_total >= prev_uncorrected THEN ecc_uncorrected_errors_total - prev_uncorrected
                ELSE ecc_uncorrected_errors_total END AS uncorrected_increase,
           CASE WHEN prev_corrected IS NULL OR ecc_corrected_errors_total IS NULL THEN 0
                WHEN ecc_corrected_errors_total >= prev_corrected THEN ecc_corrected_errors_total - prev_corrected
                ELSE ecc_corrected_errors_total END AS corrected_increase,
           CASE WHEN prev_remapped IS NULL OR remapped_rows_uncorrectable_total IS NULL THEN 0
                WHEN remapped_rows_uncorrectable_total >= prev_remapped THEN remapped_rows_uncorrectable_total - prev_remapped
                ELSE remapped_rows_uncorrectable_total END AS remapped_uncorrectable_increase,
           coalesce(row_remap_pending AND prev_pending = false, false) AS pending_raised
    FROM samples
)
SELECT host, gpu_index, any_value(gpu_uuid) AS gpu_uuid,
       time_bucket(INTERVAL 1 MINUTE, time) AS minute,
       time_bucket(INTERVAL 1 MINUTE, time) + INTERVAL 1 MINUTE AS tick, TRUE AS in_window,
       mode(run_id) AS run_id,
       count(*) AS samples,
       sum(uncorrected_increase) AS uncorrected_increase,
       sum(corrected_increase) AS corrected_increase,
       sum(remapped_uncorrectable_increase) AS remapped_uncorrectable_increase,
       bool_or(pending_raised) AS pending_raised,
       bool_or(row_remap_pending) AS row_remap_pending,
       coalesce(bool_or(row_remap_failure), false) AS row_remap_failure,
       max(ecc_uncorrected_errors_total) AS ecc_uncorrected_errors_total,
       min(time) FILTER (WHERE uncorrected_increase > 0 OR remapped_uncorrectable_increase > 0 OR pending_raised) AS event_time
FROM events
WHERE time >= $start
GROUP BY host, gpu_index, time_bucket(INTERVAL 1 MINUTE, time)
ORDER BY host, gpu_index, minute;
