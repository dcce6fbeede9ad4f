-- Badput, part 2 of 5: what one hourly partition reads, from $read_from (sql/badput/extent.sql) on.
-- Temp tables, connection-local:
--   bp_rank_gpus the GPUs each run's step records name
--   bp_slots     the GPU samples held by runs in the write window, one row per run, time and interval
--                (the GPUs of one host are sampled together), split into the run's rank GPUs and spares
--   bp_steps     one row per run, attempt and step (over ranks; a step in one row of step_ends is that row),
--                with the run's trailing baseline
CREATE OR REPLACE TEMP TABLE bp_rank_gpus AS
SELECT DISTINCT run_id, host, gpu_index
FROM training_steps
WHERE time >= $read_from - to_minutes($baseline_minutes) AND time < $end + INTERVAL 10 MINUTE
  AND host IS NOT NULL AND gpu_index IS NOT NULL;

CREATE OR REPLACE TEMP TABLE bp_slots AS
WITH s AS (
    SELECT time, host, gpu_index, gpu_name, run_id, utilization_ratio,
           epoch(lead(time) OVER (PARTITION BY host, gpu_index ORDER BY time) - time) AS gap_seconds
    FROM gpu_samples
    WHERE time >= $read_from AND time < $end
),
held AS (
    SELECT s.*, median(gap_seconds) OVER (PARTITION BY host, gpu_index) AS sample_seconds,
           -- a run that names no GPUs in its step records: every GPU it holds is one of its ranks'
           (EXISTS (SELECT 1 FROM bp_rank_gpus g WHERE g.run_id = s.run_id AND g.host = s.host AND g.gpu_index = s.gpu_index)
            OR NOT EXISTS (SELECT 1 FROM bp_rank_gpus g WHERE g.run_id = s.run_id)) AS rank_gpu
    FROM s
    WHERE run_id IS NOT NULL
)
SELECT h.run_id, h.time, h.sample_seconds AS slot_seconds, time_bucket(INTERVAL 1 MINUTE, h.time) AS minute,
       count(*) FILTER (h.rank_gpu)                                   AS rank_gpus,
       count(*) FILTER (NOT h.rank_gpu)                               AS spare_gpus,
       avg(h.utilization_ratio) FILTER (h.rank_gpu)                   AS utilization,
       mode(h.gpu_name)                                               AS gpu_name
FROM held h
WHERE h.sample_seconds IS NOT NULL
  AND (h.time >= $start - INTERVAL 2 MINUTE OR EXISTS (SELECT 1 FROM bp_rewrite r WHERE r.run_id = h.run_id AND h.time >= r.write_from))
GROUP BY ALL;

CREATE OR REPLACE TEMP TABLE bp_steps AS
WITH ends AS (      -- step_ends (the training baselines write it): a step's ranks' records in one minute, in one row
    SELECT e.*, coalesce(a.attempt, 0) AS attempt,
           -- a restart began in the minute: its records may belong to two attempts
           EXISTS (SELECT 1 FROM bp_attempts b WHERE b.run_id = e.run_id AND b.started_at >= e.minute
                                                   AND b.started_at < e.minute + INTERVAL 1 MINUTE) AS mixed
    FROM step_ends e
    ASOF LEFT JOIN bp_attempts a ON e.run_id = a.run_id AND e.time >= a.started_at
    WHERE e.minute >= $read_from - to_minutes($baseline_minutes) AND e.minute < $end
      AND e.run_id IN (SELECT DISTINCT run_id FROM bp_slots)
),
tail AS (           -- the next hour's first minutes: its step_ends may not be written yet
    SELECT run_id, step FROM training_steps
    WHERE time >= $end AND time < $end + INTERVAL 10 MINUTE AND run_id IN (SELECT DISTINCT run_id FROM bp_slots)
),
regrouped AS (      -- steps that are not one row of step_ends: grouped from their ranks' records
    SELECT run_id, step FROM ends WHERE mixed
    UNION SELECT run_id, step FROM ends GROUP BY run_id, attempt, step HAVING count(*) > 1
    UNION SELECT run_id, step FROM tail
),
records AS (        -- (a join, not IN: with no step to regroup, the step records are not scanned)
    SELECT t.*, coalesce(a.attempt, 0) AS attempt
    FROM (SELECT t.* FROM training_steps t SEMI JOIN regrouped r ON t.run_id = r.run_id AND t.step = r.step
          WHERE t.time >= $read_from - to_minutes($baseline_minutes) AND t.time < $end + INTERVAL 10 MINUTE) t
    ASOF LEFT JOIN bp_attempts a ON t.run_id = a.run_id AND t.time >= a.started_at
),
-- one row per run, attempt and step, its figures the medians over its ranks (sql/baselines/step_ends.sql
-- takes the same medians per minute: a step in one row of it is that row)
steps AS (
    SELECT run_id, attempt, step,
           max(time)                AS step_end,
           median(step_seconds)     AS step_seconds,
           coalesce(median(data_seconds), 0) AS data_seconds,
           -- achieved model FLOP/s per GPU: a rank's tokens x FLOPs per token (else 6 x parameters) / its step time
           median(tokens * coalesce(model_flops_per_token, 6.0 * parameters) / nullif(step_seconds, 0)) AS model_flops_per_second,
           median(tflops) * 1e12    AS reported_flops_per_second
    FROM records
    GROUP BY ALL
    UNION ALL
    SELECT run_id, attempt, step, time, step_seconds, coalesce(data_seconds, 0), model_flops_per_second, reported_flops_per_second
    FROM ends ANTI JOIN regrouped USING (run_id, step)
),
placed AS (
    SELECT *,
           coalesce(step_end - to_microseconds(CAST(step_seconds * 1e6 AS BIGINT)),
                    lag(step_end) OVER (PARTITION BY run_id, attempt ORDER BY step_end), step_end) AS step_start,
           time_bucket(INTERVAL 1 MINUTE, step_end) AS minute
    FROM steps
),
per_minute AS (
    SELECT run_id, minute,
           median(step_seconds - data_seconds)          AS other_median,
           1.4826 * mad(step_seconds - data_seconds)    AS other_sigma,
           median(data_seconds)                         AS data_median,
           1.4826 * mad(data_seconds)                   AS data_sigma
    FROM placed WHERE step_seconds IS NOT NULL
    GROUP BY ALL
),
-- a step is discarded (wasted progress) when a later attempt of the run started at or before it
attempt_firsts AS (
    SELECT run_id, attempt, min(step) AS first_step FROM steps WHERE attempt > 0 GROUP BY ALL
),
-- the run's own baseline: the median of its ordinary minutes' medians over the trailing window (the
-- current minute excluded). A minute is not ordinary when its median is above the window's lower
-- quartile by more than the excess threshold, so a slowdown does not drag the ideal up with it.
quartiles AS (
    SELECT *,
           coalesce(quantile_cont(other_median, 0.25) OVER w, other_median) AS other_q25,
           coalesce(quantile_cont(data_median, 0.25) OVER w, data_median)   AS data_q25
    FROM per_minute
    WINDOW w AS (PARTITION BY run_id ORDER BY minute
                 RANGE BETWEEN to_minutes($baseline_minutes) PRECEDING AND INTERVAL 1 MINUTE PRECEDING)
),
marked AS (
    SELECT *,
           other_median - other_q25 > $min_excess_ratio * (other_q25 + data_q25) AS other_slow,
           data_median - data_q25 > $min_excess_ratio * (other_q25 + data_q25)   AS data_slow
    FROM quartiles
),
baseline AS (
    SELECT run_id, minute,
           coalesce(median(other_median) FILTER (NOT other_slow) OVER w, other_q25) AS ideal_other_seconds,
           coalesce(median(other_sigma) OVER w, other_sigma)                       AS other_sigma,
           coalesce(median(data_median) FILTER (NOT data_slow) OVER w, data_q25)   AS data_baseline_seconds,
           coalesce(median(data_sigma) OVER w, data_sigma)                         AS data_sigma
    FROM marked
    WINDOW w AS (PARTITION BY run_id ORDER BY minute
                 RANGE BETWEEN to_minutes($baseline_minutes) PRECEDING AND INTERVAL 1 MINUTE PRECEDING)
)
SELECT p.*, b.ideal_other_seconds, b.data_baseline_seconds, b.other_sigma, b.data_sigma,
       b.ideal_other_seconds + b.data_baseline_seconds AS ideal_step_seconds,
       greatest($hang_min_seconds, $hang_factor * (b.ideal_other_seconds + b.data_baseline_seconds)) AS hang_threshold_seconds,
       coalesce(p.step >= (SELECT min(f.first_step) FROM attempt_firsts f
                             WHERE f.run_id = p.run_id AND f.attempt > p.attempt), false) AS discarded
FROM placed p
LEFT JOIN baseline b USING (run_id, minute);
