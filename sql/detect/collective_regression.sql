-- Per run and minute, from $lookback_minutes before the partition to $end (`in_window` marks the
-- partition's minutes): the run's collective and compute time (medians over its ranks' records)
-- with their trailing baselines, the lowest collective baseline seen since the lookback began
-- (what an open regression is held against), and the slowest rank's compute over the median
-- rank's (a straggler, not the network, when well above 1).
WITH runs AS (
    SELECT run_id, minute, ranks_reporting, collective_seconds, collective_seconds_baseline, collective_seconds_mad,
           compute_seconds, baseline_minutes,
           median(compute_seconds) OVER (
               PARTITION BY run_id ORDER BY minute
               RANGE BETWEEN to_minutes(CAST($window_minutes AS INTEGER)) PRECEDING AND INTERVAL 1 MINUTE PRECEDING
           ) AS compute_seconds_baseline
    FROM run_minutes
    WHERE minute >= $start - to_minutes(CAST($lookback_minutes + $window_minutes AS INTEGER)) AND minute < $end
), ranks AS (
    SELECT run_id, minute,
           max(compute_seconds) / nullif(median(compute_seconds), 0) AS compute_outlier_ratio,
           list(DISTINCT host ORDER BY host) FILTER (WHERE host IS NOT NULL) AS hosts,
           list(DISTINCT host || ':' || gpu_index ORDER BY host || ':' || gpu_index)
               FILTER (WHERE host IS NOT NULL AND gpu_index IS NOT NULL) AS gpus
    FROM rank_minutes
    WHERE minute >= $start - to_minutes(CAST($lookback_minutes AS INTEGER)) AND minute < $end
    GROUP BY run_id, minute
)
SELECT r.run_id, r.minute,
       r.minute + INTERVAL 1 MINUTE AS tick,
       r.minute + INTERVAL 1 MINUTE > $start AS in_window,
       r.ranks_reporting, r.collective_seconds, r.collective_seconds_baseline, r.collective_seconds_mad,
       min(r.collective_seconds_baseline) OVER (PARTITION BY r.run_id ORDER BY r.minute ROWS UNBOUNDED PRECEDING)
           AS collective_baseline_floor,
       r.compute_seconds, r.compute_seconds_baseline, r.baseline_minutes,
       k.compute_outlier_ratio, k.hosts, k.gpus
FROM runs r
JOIN ranks k USING (run_id, minute)
ORDER BY r.run_id, r.minute;
