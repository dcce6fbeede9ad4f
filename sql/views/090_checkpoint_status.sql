-- checkpoint_status: one row per run: its last checkpoint (path, step, size, files), how old it was
-- at the run's last step (data time; for wall time use now() - saved_at), the steps done since, and
-- what a restart from it would cost now: the run's GPUs x the time since that step completed.
CREATE OR REPLACE VIEW checkpoint_status AS
WITH ck AS (
    SELECT run_id, time AS saved_at, step, checkpoint_path,
           TRY_CAST(payload ->> 'checkpoint_bytes' AS BIGINT)          AS checkpoint_bytes,
           CAST(json_array_length(payload -> 'manifest' -> 'files') AS INTEGER) AS checkpoint_files,
           row_number() OVER (PARTITION BY run_id ORDER BY time DESC, step DESC) AS newest,
           count(*) OVER (PARTITION BY run_id)                         AS checkpoints,
           epoch(time - lag(time) OVER (PARTITION BY run_id ORDER BY time)) AS seconds_since_previous
    FROM lineage_events
    WHERE event = 'checkpoint_saved' AND run_id IS NOT NULL
),
cadence AS (
    SELECT run_id, median(seconds_since_previous) AS median_checkpoint_interval_seconds FROM ck GROUP BY run_id
),
last AS (SELECT * FROM ck WHERE newest = 1),
step_done AS (
    SELECT t.run_id, max(t.time) AS step_completed_at
    FROM training_steps t JOIN last l ON l.run_id = t.run_id AND l.step = t.step
    GROUP BY t.run_id
)
SELECT r.run_id,
       r.team,
       l.checkpoint_path                                   AS last_checkpoint,
       l.step                                              AS checkpoint_step,
       l.saved_at,
       l.checkpoint_bytes,
       l.checkpoint_files,
       coalesce(l.checkpoints, 0)                          AS checkpoints,
       c.median_checkpoint_interval_seconds,
       r.last_step,
       r.last_step_at,
       r.last_step - coalesce(l.step, 0)                   AS steps_since_checkpoint,
       epoch(r.last_step_at - l.saved_at)                  AS checkpoint_age_seconds,
       r.gpus,
       r.gpus * epoch(r.last_step_at - coalesce(d.step_completed_at, l.saved_at, r.first_step_at)) / 3600
                                                           AS restart_cost_gpu_hours
FROM runs r
LEFT JOIN last l USING (run_id)
LEFT JOIN cadence c USING (run_id)
LEFT JOIN step_done d USING (run_id);
