-- Progress time series for every run that holds GPUs in [$start, $end): one row per run per
-- minute tick, with its GPUs' mean utilization over the trailing $util_window_seconds, the last
-- time the run completed a step, and the run's own typical seconds between steps (its rolling
-- baseline over the trailing $lookback_seconds). Ticks stop where the GPU samples stop.
WITH data_until AS (
    SELECT max(time) AS t FROM gpu_samples WHERE time >= $start AND time < $end
), ticks AS (
    SELECT unnest(generate_series($start + INTERVAL 1 MINUTE, $end, INTERVAL 1 MINUTE)) AS tick
), samples AS (
    SELECT run_id, time, host, gpu_index, utilization_ratio
    FROM gpu_samples
    WHERE run_id IS NOT NULL
      AND time >= $start - to_seconds($util_window_seconds) AND time < $end
), run_ticks AS (
    SELECT s.run_id, t.tick,
           avg(s.utilization_ratio) AS utilization_mean,
           count(*) AS samples,
           list(DISTINCT s.host ORDER BY s.host) AS hosts,
           list(DISTINCT s.host || ':' || s.gpu_index ORDER BY s.host || ':' || s.gpu_index) AS gpus
    FROM ticks t
    JOIN samples s ON s.time > t.tick - to_seconds($util_window_seconds) AND s.time <= t.tick
    WHERE t.tick <= (SELECT t FROM data_until)
    GROUP BY ALL
), runs AS (
    SELECT DISTINCT run_id FROM run_ticks
), attempts AS (   -- a restart from a checkpoint computes its steps again: each attempt's own
    SELECT run_id, time AS attempt FROM lineage_events SEMI JOIN runs USING (run_id) WHERE event = 'run_started'
), recent AS (   -- one row per completed step of an attempt: when its last rank finished it
    SELECT p.run_id, p.step, max(p.time) AS time
    FROM training_steps p SEMI JOIN runs USING (run_id)
    ASOF LEFT JOIN attempts a ON a.run_id = p.run_id AND a.attempt <= p.time
    WHERE p.time >= $start - to_seconds($lookback_seconds) AND p.time < $end
    GROUP BY p.run_id, p.step, a.attempt
), near AS (     -- the last step before the lookback, so a long stall keeps its true onset: looked for in
                 -- the hour before the lookback first ...
    SELECT p.run_id, arg_max(p.step, p.time) AS step, max(p.time) AS time
    FROM training_steps p SEMI JOIN runs USING (run_id)
    WHERE p.time >= $start - to_seconds($lookback_seconds) - INTERVAL 1 HOUR
      AND p.time < $start - to_seconds($lookback_seconds)
    GROUP BY ALL
), far AS (      -- ... and further back only for a run that made no step in that hour: a tick's cost does
                 -- not grow with the days of raw steps retained (no run to look for: no scan at all)
    SELECT p.run_id, arg_max(p.step, p.time) AS step, max(p.time) AS time
    FROM training_steps p SEMI JOIN (SELECT run_id FROM runs ANTI JOIN near USING (run_id)) USING (run_id)
    WHERE p.time < $start - to_seconds($lookback_seconds) - INTERVAL 1 HOUR
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
)
SELECT r.run_id, r.tick, TRUE AS in_window, r.utilization_mean, r.samples, r.hosts, r.gpus,
       p.time AS last_progress, p.step AS last_step,
       s.started AS run_started,
       b.step_interval_seconds, coalesce(b.steps, 0) AS baseline_steps
FROM run_ticks r
ASOF LEFT JOIN progress p ON p.run_id = r.run_id AND p.time <= r.tick
LEFT JOIN baseline b ON b.run_id = r.run_id
LEFT JOIN started s ON s.run_id = r.run_id
ORDER BY r.run_id, r.tick;
