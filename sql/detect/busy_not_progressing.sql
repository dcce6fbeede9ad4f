-- Progress time series for every run that holds GPUs in [$start, $end): one row per run per
-- minute tick, with its GPUs' mean utilization over the trailing $util_window_seconds, the last
-- time the run completed a step, and the run's own typical seconds between steps (its rolling
-- baseline over the trailing $lookback_seconds). Ticks stop where the GPU samples stop. Steps are read
-- from step_ends (written by the training baselines), so the check runs after them.
WITH data_until AS (
    SELECT max(time) AS t FROM gpu_samples WHERE time >= $start AND time < $end
), ticks AS (
    SELECT unnest(generate_series($start + INTERVAL 1 MINUTE, $end, INTERVAL 1 MINUTE)) AS tick
), samples AS (
    SELECT run_id, time, host, gpu_index, utilization_ratio
    FROM gpu_samples
    WHERE run_id IS NOT NULL
      AND time >= $start - to_seconds($util_window_seconds) AND time < $end
), held AS (     -- a sample counts at every tick whose trailing window holds it (time <= tick < time + window):
                 -- from the first whole minute at or after it to the last before time + window. Summed per GPU
                 -- and those two ticks, the ticks join a row per GPU and minute, not each of its samples
    SELECT run_id, host, gpu_index, host || ':' || gpu_index AS gpu, first_tick, last_tick,
           sum(utilization_ratio) AS utilization, count(utilization_ratio) AS utilized, count(*) AS samples
    FROM (SELECT *, time_bucket(INTERVAL 1 MINUTE, time - INTERVAL 1 MICROSECOND) + INTERVAL 1 MINUTE AS first_tick,
                 time_bucket(INTERVAL 1 MINUTE, time + to_seconds($util_window_seconds) - INTERVAL 1 MICROSECOND)
                     AS last_tick
          FROM samples)
    GROUP BY run_id, host, gpu_index, first_tick, last_tick
), run_ticks AS (
    SELECT s.run_id, t.tick,
           sum(s.utilization) / nullif(sum(s.utilized), 0) AS utilization_mean,
           CAST(sum(s.samples) AS BIGINT) AS samples,
           list(DISTINCT s.host ORDER BY s.host) AS hosts,
           list(DISTINCT s.gpu ORDER BY s.gpu) AS gpus
    FROM ticks t
    JOIN held s ON t.tick BETWEEN s.first_tick AND s.last_tick
    WHERE t.tick <= (SELECT t FROM data_until)
    GROUP BY ALL
), runs AS (
    SELECT DISTINCT run_id FROM run_ticks
), attempts AS (   -- a restart from a checkpoint computes its steps again: each attempt's own
    SELECT run_id, time AS attempt FROM lineage_events SEMI JOIN runs USING (run_id) WHERE event = 'run_started'
), bound AS (    -- the lookback's first minute ($lookback_seconds floored to a whole minute; every default is one)
    SELECT time_bucket(INTERVAL 1 MINUTE, $start - to_seconds($lookback_seconds)) AS t
), recent AS (   -- one row per completed step of an attempt: when its last rank finished it. step_ends holds
                 -- that per step and minute (sql/baselines/step_ends.sql), a row per step where the step
                 -- records hold one per rank: a tick reads the lookback's steps, not every rank's records
    SELECT e.run_id, e.step, max(e.time) AS time
    FROM step_ends e SEMI JOIN runs USING (run_id)
    ASOF LEFT JOIN attempts a ON a.run_id = e.run_id AND a.attempt <= e.time
    WHERE e.minute >= (SELECT t FROM bound) AND e.minute < $end
    GROUP BY e.run_id, e.step, a.attempt
), near AS (     -- the last step before the lookback, so a long stall keeps its true onset: looked for in
                 -- the hour before the lookback first ...
    SELECT e.run_id, arg_max(e.step, e.time) AS step, max(e.time) AS time
    FROM step_ends e SEMI JOIN runs USING (run_id)
    WHERE e.minute >= (SELECT t FROM bound) - INTERVAL 1 HOUR AND e.minute < (SELECT t FROM bound)
    GROUP BY ALL
), far AS (      -- ... and further back only for a run that made no step in that hour: a tick's cost does
                 -- not grow with the days of steps retained (no run to look for: no scan at all)
    SELECT e.run_id, arg_max(e.step, e.time) AS step, max(e.time) AS time
    FROM step_ends e SEMI JOIN (SELECT run_id FROM runs ANTI JOIN near USING (run_id)) USING (run_id)
    WHERE e.minute < (SELECT t FROM bound) - INTERVAL 1 HOUR
    GROUP BY ALL
), progress AS (
    SELECT * FROM recent UNION ALL SELECT * FROM near UNION ALL SELECT * FROM far
), baseline AS (
    SELECT run_id, median(gap) AS step_interval_seconds, count(gap) AS steps
    FROM (
        SELECT run_id, epoch(time - lag(time) OVER (PARTITION BY run_id ORDER BY time)) AS gap
        FROM recent
    )
    WHERE gap > 0
    GROUP BY ALL
), started AS (
    SELECT run_id, max(time) AS started
    FROM lineage_events SEMI JOIN runs USING (run_id)
    WHERE event = 'run_started' AND time < $end
    GROUP BY ALL
), tick_progress AS (   -- the ASOF join on the ticks' keys alone: DuckDB plans it as a join and a grouping
                        -- that carry every column given to them, the GPU lists included
    SELECT r.run_id, r.tick, p.time AS last_progress, p.step AS last_step
    FROM (SELECT run_id, tick FROM run_ticks) r
    ASOF LEFT JOIN progress p ON p.run_id = r.run_id AND p.time <= r.tick
)
SELECT r.run_id, r.tick, TRUE AS in_window, r.utilization_mean, r.samples, r.hosts, r.gpus,
       p.last_progress, p.last_step,
       s.started AS run_started,
       b.step_interval_seconds, coalesce(b.steps, 0) AS baseline_steps
FROM run_ticks r
JOIN tick_progress p ON p.run_id = r.run_id AND p.tick = r.tick
LEFT JOIN baseline b ON b.run_id = r.run_id
LEFT JOIN started s ON s.run_id = r.run_id
ORDER BY r.run_id, r.tick;
