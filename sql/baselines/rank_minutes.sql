-- Replace one hour of rank_minutes: per run, rank and minute, the rank's figures, the same minute's
-- median over the run's ranks (peer_*), and the rank's own trailing $window_minutes baseline.
-- [$from, $end): the whole hour, or from the first minute whose inputs changed (a live run); the rows
-- are read from $read_from, the lookback of $from's trailing window (assets/baselines.py series_params).
DELETE FROM rank_minutes WHERE minute >= $from AND minute < $end;
INSERT INTO rank_minutes BY NAME
WITH per_minute AS (
    SELECT run_id, rank,
           any_value(host) AS host,
           any_value(gpu_index) AS gpu_index,
           time_bucket(INTERVAL 1 MINUTE, time) AS minute,
           count(DISTINCT step) AS steps_completed,
           max(step) AS last_step,
           max(time) AS last_step_time,
           median(loss) FILTER (WHERE isfinite(loss)) AS loss,
           count(*) FILTER (WHERE loss IS NOT NULL AND NOT isfinite(loss)) AS nonfinite_losses,
           median(grad_norm) FILTER (WHERE isfinite(grad_norm)) AS grad_norm,
           median(step_seconds) AS step_seconds,
           median(data_seconds) AS data_seconds,
           median(compute_seconds) AS compute_seconds,
           median(collective_seconds) AS collective_seconds,
           max(memory_allocated_bytes) AS memory_allocated_bytes,
           max(memory_reserved_bytes) AS memory_reserved_bytes,
           max(memory_inactive_split_bytes) AS memory_inactive_split_bytes,
           max(alloc_retries_total) AS alloc_retries_total,
           max(ooms_total) AS ooms_total
    FROM training_steps
    WHERE time >= $read_from AND time < $end
    GROUP BY ALL
), with_peers AS (
    SELECT *,
           median(compute_seconds) OVER peers AS peer_compute_seconds,
           median(collective_seconds) OVER peers AS peer_collective_seconds,
           median(grad_norm) OVER peers AS peer_grad_norm,
           count(*) OVER peers AS peer_ranks
    FROM per_minute
    WINDOW peers AS (PARTITION BY run_id, minute)
)
SELECT *,
       median(compute_seconds) OVER w AS compute_seconds_baseline,
       mad(compute_seconds) OVER w AS compute_seconds_mad,
       median(grad_norm / nullif(peer_grad_norm, 0)) OVER w AS grad_norm_ratio_baseline,
       $window_minutes AS baseline_window_minutes,
       count(*) OVER w AS baseline_minutes
FROM with_peers
WINDOW w AS (PARTITION BY run_id, rank ORDER BY minute
             RANGE BETWEEN to_minutes($window_minutes) PRECEDING AND INTERVAL 1 MINUTE PRECEDING)
QUALIFY minute >= $from
ORDER BY run_id, rank, minute;
SELECT count(*) FROM rank_minutes WHERE minute >= $start AND minute < $end;
