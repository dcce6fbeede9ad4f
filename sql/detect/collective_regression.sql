-- Per run and minute, from $lookback_minutes before the partition to $end (`in_window` marks the
-- partition's minutes): the run's communication time with the waiting taken out, and its trailing
-- baseline. In a synchronous collective a rank waits for the last one to arrive, so its collective
-- time is transfer + (latest arrival - its own arrival), arrival = data + compute: a straggler lengthens
-- its peers' collectives, not the transfer. Per rank the transfer is estimated as its collective minus
-- that wait; per host the median over its ranks; per run the slowest host's (one host's degraded
-- links show, as does a run-wide slowdown). The baseline (median/MAD over the trailing
-- $window_minutes, the current minute excluded) is taken over the same statistic, so a straggler's
-- inflated waits never enter it; `transfer_baseline_floor` is the lowest baseline since the lookback
-- began, of those with $min_baseline_minutes of history (a run's first minutes say little), which an
-- open regression is held against: the trailing baseline climbs with a long one.
WITH ranks AS (
    SELECT run_id, minute, host, gpu_index, compute_seconds, collective_seconds,
           max(coalesce(data_seconds, 0) + compute_seconds) OVER (PARTITION BY run_id, minute)
               - (coalesce(data_seconds, 0) + compute_seconds) AS wait_seconds
    FROM rank_minutes
    WHERE minute >= $start - to_minutes(CAST($lookback_minutes + $window_minutes AS INTEGER)) AND minute < $end
), hosts AS (
    SELECT run_id, minute, coalesce(host, '?') AS host,
           median(greatest(collective_seconds - coalesce(wait_seconds, 0), 0)) AS transfer_seconds
    FROM ranks
    GROUP BY ALL
), per_minute AS (
    SELECT r.run_id, r.minute, count(*) AS ranks_reporting,
           median(r.collective_seconds) AS collective_seconds,
           median(r.wait_seconds) AS wait_seconds,
           median(r.compute_seconds) AS compute_seconds,
           max(r.compute_seconds) / nullif(median(r.compute_seconds), 0) AS compute_outlier_ratio,
           list(DISTINCT r.host ORDER BY r.host) FILTER (WHERE r.host IS NOT NULL) AS hosts,
           list(DISTINCT r.host || ':' || r.gpu_index ORDER BY r.host || ':' || r.gpu_index)
               FILTER (WHERE r.host IS NOT NULL AND r.gpu_index IS NOT NULL) AS gpus
    FROM ranks r
    GROUP BY r.run_id, r.minute
), slowest AS (
    SELECT run_id, minute, max(transfer_seconds) AS transfer_seconds, arg_max(host, transfer_seconds) AS slowest_host,
           min(transfer_seconds) AS fastest_host_transfer_seconds
    FROM hosts
    GROUP BY run_id, minute
), baselines AS (
    SELECT p.*, s.transfer_seconds, s.slowest_host, s.fastest_host_transfer_seconds,
           median(s.transfer_seconds) OVER w AS transfer_seconds_baseline,
           mad(s.transfer_seconds) OVER w AS transfer_seconds_mad,
           median(p.compute_seconds) OVER w AS compute_seconds_baseline,
           count(s.transfer_seconds) OVER w AS baseline_minutes
    FROM per_minute p
    JOIN slowest s USING (run_id, minute)
    WINDOW w AS (PARTITION BY p.run_id ORDER BY p.minute
                 RANGE BETWEEN to_minutes(CAST($window_minutes AS INTEGER)) PRECEDING AND INTERVAL 1 MINUTE PRECEDING)
)
SELECT run_id, minute,
       minute + INTERVAL 1 MINUTE AS tick,
       minute + INTERVAL 1 MINUTE > $start AS in_window,
       ranks_reporting, collective_seconds, wait_seconds, transfer_seconds, slowest_host, fastest_host_transfer_seconds,
       transfer_seconds_baseline, transfer_seconds_mad,
       min(CASE WHEN baseline_minutes >= $min_baseline_minutes THEN transfer_seconds_baseline END)
           OVER (PARTITION BY run_id ORDER BY minute ROWS UNBOUNDED PRECEDING) AS transfer_baseline_floor,
       compute_seconds, compute_seconds_baseline, compute_outlier_ratio, baseline_minutes, hosts, gpus
FROM baselines
WHERE minute >= $start - to_minutes(CAST($lookback_minutes AS INTEGER))
ORDER BY run_id, minute;
