-- Row-remap failure state per GPU and minute, from $lookback_minutes before the partition (so a
-- stretch keeps its onset across the hour) to $end; `in_window` marks the partition's minutes.
SELECT host, gpu_index, gpu_uuid, minute,
       minute + INTERVAL 1 MINUTE AS tick,
       minute + INTERVAL 1 MINUTE > $start AS in_window,
       run_id, samples, row_remap_failure,
       CASE WHEN row_remap_failure THEN minute END AS failure_since,
       ecc_uncorrected_errors_total, remapped_rows_uncorrectable_total
FROM gpu_minutes
WHERE minute >= $start - to_minutes(CAST($lookback_minutes AS INTEGER)) AND minute < $end
ORDER BY host, gpu_index, minute;
