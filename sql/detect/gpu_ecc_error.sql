-- ECC events per GPU and minute of [$start, $end): increases of the uncorrected and corrected error
-- counters and of the uncorrectable remapped rows over their previous readings (looking back
-- $lookback_minutes), and whether a row remap turned pending (false before, true now). Levels that
-- were already non-zero, or already pending, before the window do not count.
-- From gpu_counter_minutes (the GPU baselines write it): a minute's increase is its first reading's rise
-- over the last reading before it, plus the rises between its own samples, so a tick reads a row per GPU
-- and minute, not every sample of the hour so far and the lookback.
WITH counters AS (
    SELECT *,
           last_value(uncorrected_last IGNORE NULLS) OVER before AS uncorrected_previous,
           last_value(corrected_last IGNORE NULLS) OVER before AS corrected_previous,
           last_value(remapped_last IGNORE NULLS) OVER before AS remapped_previous,
           last_value(pending_last IGNORE NULLS) OVER before AS pending_previous
    FROM gpu_counter_minutes
    WHERE minute >= $start - to_minutes(CAST($lookback_minutes AS INTEGER)) AND minute < $end
    WINDOW before AS (PARTITION BY host, gpu_index ORDER BY minute ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
), minutes AS (
    SELECT *,
           counter_increase(uncorrected_first, uncorrected_previous) AS uncorrected_first_rise,
           counter_increase(corrected_first, corrected_previous) AS corrected_first_rise,
           counter_increase(remapped_first, remapped_previous) AS remapped_first_rise,
           coalesce(pending_first AND pending_previous = false, false) AS pending_first_raised
    FROM counters
    WHERE minute >= $start
)
SELECT g.host, g.gpu_index, g.gpu_uuid, g.minute,
       g.minute + INTERVAL 1 MINUTE AS tick, TRUE AS in_window,
       g.run_id, CAST(g.samples AS BIGINT) AS samples,
       CAST(c.uncorrected_first_rise + c.uncorrected_rise AS HUGEINT) AS uncorrected_increase,   -- HUGEINT: the type a sum over samples gave
       CAST(c.corrected_first_rise + c.corrected_rise AS HUGEINT) AS corrected_increase,
       CAST(c.remapped_first_rise + c.remapped_rise AS HUGEINT) AS remapped_uncorrectable_increase,
       c.pending_first_raised OR c.pending_rise_time IS NOT NULL AS pending_raised,
       g.row_remap_pending,
       coalesce(g.row_remap_failure, false) AS row_remap_failure,
       g.ecc_uncorrected_errors_total,
       least(CASE WHEN c.uncorrected_first_rise > 0 THEN c.uncorrected_first_time END, c.uncorrected_rise_time,
             CASE WHEN c.remapped_first_rise > 0 THEN c.remapped_first_time END, c.remapped_rise_time,
             CASE WHEN c.pending_first_raised THEN c.pending_first_time END, c.pending_rise_time) AS event_time
FROM minutes c
JOIN gpu_minutes g ON g.host = c.host AND g.gpu_index = c.gpu_index AND g.minute = c.minute
ORDER BY g.host, g.gpu_index, g.minute;
