-- Per run and minute with steps (from $lookback_seconds before the partition to $end): the run's
-- progress, its last checkpoint_saved at that moment and its own checkpoint cadence (median steps
-- and seconds between its saves so far), and its GPUs. `in_window` marks the partition's minutes.
WITH saves AS (
    SELECT run_id, time, step,
           step - lag(step) OVER w                AS step_gap,
           epoch(time - lag(time) OVER w)         AS seconds_gap
    FROM lineage_events
    WHERE event = 'checkpoint_saved' AND run_id IS NOT NULL AND step IS NOT NULL AND time < $end
    WINDOW w AS (PARTITION BY run_id ORDER BY time)
),
minutes AS (     -- from step_ends (the training baselines write it): a row per step and minute, where the step
                 -- records hold one per rank; the lookback's start floored to a whole minute (every default is one)
    SELECT run_id, minute, max(step) AS step, max(time) AS last_step_at
    FROM step_ends
    WHERE minute >= time_bucket(INTERVAL 1 MINUTE, $start - to_seconds(CAST($lookback_seconds AS BIGINT))) AND minute < $end
    GROUP BY run_id, minute
),
cadence AS (
    -- as of each minute: the cadence of the saves before it (a run's own interval, never a global one)
    SELECT m.run_id, m.minute,
           (SELECT median(s.step_gap) FROM saves s WHERE s.run_id = m.run_id AND s.time <= m.last_step_at) AS interval_steps,
           (SELECT median(s.seconds_gap) FROM saves s WHERE s.run_id = m.run_id AND s.time <= m.last_step_at) AS interval_seconds,
           (SELECT count(*) FROM saves s WHERE s.run_id = m.run_id AND s.time <= m.last_step_at) AS saves
    FROM minutes m
),
gpus AS (
    SELECT run_id, arg_max(coalesce(CAST(json_array_length(payload -> 'gpus') AS INTEGER),
                                    TRY_CAST(payload ->> 'world_size' AS INTEGER)), time) AS gpus
    FROM lineage_events WHERE event = 'run_started' AND run_id IS NOT NULL AND time < $end GROUP BY run_id
)
SELECT m.run_id, m.minute, m.minute + INTERVAL 1 MINUTE AS tick, m.minute + INTERVAL 1 MINUTE > $start AS in_window,
       m.step, m.last_step_at, s.time AS last_saved_at, s.step AS last_saved_step,
       c.interval_steps, c.interval_seconds, c.saves, g.gpus
FROM minutes m
ASOF LEFT JOIN saves s ON s.run_id = m.run_id AND s.time <= m.last_step_at
LEFT JOIN cadence c ON c.run_id = m.run_id AND c.minute = m.minute
LEFT JOIN gpus g ON g.run_id = m.run_id
ORDER BY m.run_id, m.minute;
