-- run_health: one row per run and UTC minute: progress (steps, ranks reporting), loss, grad norm,
-- step time, throughput, the utilization of the run's GPUs, and the incidents open on the run in
-- that minute. status: incident (an incident covers the minute), progressing (steps completed),
-- not_progressing (GPUs held, no step).
CREATE OR REPLACE VIEW run_health AS
WITH steps AS (
    SELECT run_id,
           date_trunc('minute', time)                              AS minute,
           count(DISTINCT step)                                    AS steps_completed,
           max(step)                                               AS last_step,
           count(DISTINCT rank)                                    AS ranks_reporting,
           max(world_size)                                         AS world_size,
           median(loss) FILTER (isfinite(loss))                    AS loss,
           count(*) FILTER (loss IS NOT NULL AND NOT isfinite(loss)) AS nonfinite_losses,
           median(grad_norm) FILTER (isfinite(grad_norm))          AS grad_norm,
           median(step_seconds)                                    AS step_seconds,
           max(step_seconds)                                       AS step_seconds_max,
           sum(tokens) / 60.0                                      AS tokens_per_second
    FROM training_steps
    GROUP BY ALL
),
gpus AS (
    SELECT run_id,
           date_trunc('minute', time)                AS minute,
           count(DISTINCT host || ':' || gpu_index)   AS gpus,
           avg(utilization_ratio)                    AS utilization_ratio,
           avg(power_watts)                          AS power_watts
    FROM gpu_samples
    WHERE run_id IS NOT NULL
    GROUP BY ALL
),
joined AS (
    SELECT coalesce(s.run_id, g.run_id) AS run_id, coalesce(s.minute, g.minute) AS minute,
           s.* EXCLUDE (run_id, minute), g.* EXCLUDE (run_id, minute)
    FROM steps s
    FULL OUTER JOIN gpus g ON s.run_id = g.run_id AND s.minute = g.minute
)
SELECT j.run_id,
       j.minute,
       coalesce(j.steps_completed, 0) AS steps_completed,
       j.last_step,
       coalesce(j.ranks_reporting, 0) AS ranks_reporting,
       j.world_size,
       j.loss,
       coalesce(j.nonfinite_losses, 0) AS nonfinite_losses,
       j.grad_norm,
       j.step_seconds,
       j.step_seconds_max,
       j.tokens_per_second,
       coalesce(j.gpus, 0) AS gpus,
       j.utilization_ratio,
       j.power_watts,
       (SELECT list(DISTINCT i.signal ORDER BY i.signal) FROM incidents i
         WHERE i.run_id = j.run_id AND i.onset < j.minute + INTERVAL 1 MINUTE
           AND i.last_seen >= j.minute) AS incident_signals,
       CASE
           WHEN EXISTS (SELECT 1 FROM incidents i
                         WHERE i.run_id = j.run_id AND i.onset < j.minute + INTERVAL 1 MINUTE
                           AND i.last_seen >= j.minute) THEN 'incident'
           WHEN coalesce(j.steps_completed, 0) > 0 THEN 'progressing'
           ELSE 'not_progressing'
       END AS status
FROM joined j;
