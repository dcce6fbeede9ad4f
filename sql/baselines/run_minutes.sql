-- Replace one hour of run_minutes: per run and minute, the ranks' figures, and the trailing
-- $window_minutes robust baseline (median, MAD; the current minute excluded). The lookback is read
-- from training_steps, so each partition is computed on its own, in any order.
-- [$from, $end): the whole hour, or from the first minute whose inputs changed (a live run); the rows
-- are read from $read_from, the lookback of $from's trailing window (assets/baselines.py series_params).
DELETE FROM run_minutes WHERE minute >= $from AND minute < $end;
INSERT INTO run_minutes BY NAME
WITH paces AS (   -- a synchronous step ends when its slowest rank does: the job's pace per step
    SELECT run_id, time_bucket(INTERVAL 1 MINUTE, max(time)) AS minute, max(step_seconds) AS pace
    FROM training_steps
    WHERE time >= $read_from AND time < $end AND step_seconds IS NOT NULL
    GROUP BY run_id, step
), pace_minutes AS (
    SELECT run_id, minute, median(pace) AS pace_seconds FROM paces GROUP BY ALL
), per_minute AS (
    SELECT run_id,
           time_bucket(INTERVAL 1 MINUTE, time) AS minute,
           max(world_size) AS world_size,
           count(DISTINCT rank) AS ranks_reporting,
           count(DISTINCT step) AS steps_completed,
           max(step) AS last_step,
           max(time) AS last_step_time,
           median(loss) FILTER (WHERE isfinite(loss)) AS loss,
           min(loss) FILTER (WHERE isfinite(loss)) AS loss_min,
           max(loss) FILTER (WHERE isfinite(loss)) AS loss_max,
           count(*) FILTER (WHERE loss IS NOT NULL AND NOT isfinite(loss)) AS nonfinite_losses,
           max(nan_iterations_total) AS nan_iterations_total,
           max(skipped_iterations_total) AS skipped_iterations_total,
           median(grad_norm) FILTER (WHERE isfinite(grad_norm)) AS grad_norm,
           max(grad_norm) FILTER (WHERE isfinite(grad_norm)) AS grad_norm_max,
           min(loss_scale) AS loss_scale,
           median(learning_rate) AS learning_rate,
           -- tokens per step over the typical step time: throughput while stepping (pauses are stalls, not slowness)
           sum(tokens) / count(DISTINCT step) / nullif(median(step_seconds), 0) AS tokens_per_second,
           median(step_seconds) AS step_seconds,
           max(step_seconds) AS step_seconds_max,
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
), with_pace AS (
    SELECT m.*, p.pace_seconds FROM per_minute m LEFT JOIN pace_minutes p USING (run_id, minute)
)
SELECT *,
       median(step_seconds) OVER w AS step_seconds_baseline,
       mad(step_seconds) OVER w AS step_seconds_mad,
       median(pace_seconds) OVER w AS pace_seconds_baseline,
       mad(pace_seconds) OVER w AS pace_seconds_mad,
       median(tokens_per_second) OVER w AS tokens_per_second_baseline,
       mad(tokens_per_second) OVER w AS tokens_per_second_mad,
       median(loss) OVER w AS loss_baseline,
       mad(loss) OVER w AS loss_mad,
       median(grad_norm) OVER w AS grad_norm_baseline,
       mad(grad_norm) OVER w AS grad_norm_mad,
       median(collective_seconds) OVER w AS collective_seconds_baseline,
       mad(collective_seconds) OVER w AS collective_seconds_mad,
       $window_minutes AS baseline_window_minutes,
       count(*) OVER w AS baseline_minutes
FROM with_pace
WINDOW w AS (PARTITION BY run_id ORDER BY minute
             RANGE BETWEEN to_minutes($window_minutes) PRECEDING AND INTERVAL 1 MINUTE PRECEDING)
QUALIFY minute >= $from
ORDER BY run_id, minute;
SELECT count(*) FROM run_minutes WHERE minute >= $start AND minute < $end;
