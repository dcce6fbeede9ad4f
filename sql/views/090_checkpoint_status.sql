-- checkpoint_status: one row per run: its last checkpoint (path, step, size, files), how old it was
-- at the run's last step (data time; for wall time use now() - saved_at), the steps done since, and
-- what a restart from it would cost now: the run's GPUs x the time since that step completed.
-- From the audits (assets/checkpoints.py): the last checkpoint's audit status, how many of the
-- run's checkpoints failed their latest audit, and the restart point that counts: the newest
-- checkpoint whose latest audit passed, the steps since it and the GPU-hours a restart from it
-- would lose (null when none of the run's checkpoints was audited: they lie outside every root).
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
),
audit AS (   -- each checkpoint's latest audit
    SELECT run_id, checkpoint, recorded_path, step, saved_at, status
    FROM checkpoint_audits WHERE run_id IS NOT NULL AND status <> 'not_audited'
    QUALIFY row_number() OVER (PARTITION BY checkpoint ORDER BY partition_start DESC) = 1
),
audited AS (
    SELECT run_id, count(*) AS audited_checkpoints, count(*) FILTER (WHERE status = 'failed') AS failed_checkpoints
    FROM audit GROUP BY run_id
),
good AS (
    SELECT run_id, checkpoint, coalesce(recorded_path, checkpoint) AS path, step, saved_at
    FROM audit WHERE status = 'ok'
    QUALIFY row_number() OVER (PARTITION BY run_id ORDER BY step DESC, saved_at DESC) = 1
),
good_done AS (
    SELECT g.run_id, max(t.time) AS step_completed_at
    FROM good g JOIN training_steps t ON t.run_id = g.run_id AND t.step = g.step AND t.time <= g.saved_at
    GROUP BY g.run_id
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
                                                           AS restart_cost_gpu_hours,
       r.ended IS NULL                                     AS active,
       (SELECT a.status FROM audit a WHERE a.recorded_path = l.checkpoint_path)
                                                           AS last_checkpoint_audit,
       coalesce(au.audited_checkpoints, 0)                 AS audited_checkpoints,
       coalesce(au.failed_checkpoints, 0)                  AS failed_checkpoints,
       CASE WHEN au.audited_checkpoints > 0 THEN coalesce(g.path, 'none') END AS last_good_checkpoint,
       g.step                                              AS last_good_step,
       CASE WHEN au.audited_checkpoints > 0 THEN r.last_step - coalesce(g.step, 0) END AS steps_since_last_good,
       CASE WHEN au.audited_checkpoints > 0 THEN
           r.gpus * greatest(epoch(r.last_step_at - coalesce(gd.step_completed_at, g.saved_at, r.first_step_at)), 0) / 3600
       END                                                 AS restart_cost_last_good_gpu_hours
FROM runs r
LEFT JOIN last l USING (run_id)
LEFT JOIN cadence c USING (run_id)
LEFT JOIN step_done d USING (run_id)
LEFT JOIN audited au USING (run_id)
LEFT JOIN good g USING (run_id)
LEFT JOIN good_done gd USING (run_id);
