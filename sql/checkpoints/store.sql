-- Replace one partition's audits, problems and restart points (inside the caller's transaction).
DELETE FROM checkpoint_audits WHERE partition_start = $start;
DELETE FROM checkpoint_problems WHERE partition_start = $start;
DELETE FROM checkpoint_restart_points WHERE partition_start = $start;
INSERT INTO checkpoint_audits BY NAME SELECT * FROM new_audits;
INSERT INTO checkpoint_problems BY NAME SELECT * FROM new_problems;
-- The restart point per run audited now: the newest checkpoint whose LATEST audit (up to this
-- partition) passed; steps and GPU-hours since the step it holds completed, up to the run's last
-- step before the partition's end. GPUs: the launcher's list, else the world size (see `runs`).
INSERT INTO checkpoint_restart_points BY NAME
WITH latest AS (
    SELECT run_id, checkpoint, step, saved_at, status
    FROM checkpoint_audits
    WHERE partition_start <= $start AND run_id IS NOT NULL
    QUALIFY row_number() OVER (PARTITION BY checkpoint ORDER BY partition_start DESC) = 1
),
good AS (
    SELECT run_id, checkpoint, step, saved_at
    FROM latest WHERE status = 'ok' AND step IS NOT NULL
    QUALIFY row_number() OVER (PARTITION BY run_id ORDER BY step DESC, saved_at DESC) = 1
),
audited AS (SELECT DISTINCT run_id FROM checkpoint_audits WHERE partition_start = $start AND run_id IS NOT NULL),
progress AS (
    SELECT t.run_id, max(t.step) AS last_step, max(t.time) AS last_step_at
    FROM training_steps t JOIN audited a USING (run_id)
    WHERE t.time < $end
    GROUP BY t.run_id
),
good_done AS (
    SELECT g.run_id, max(t.time) AS done_at
    FROM good g JOIN training_steps t ON t.run_id = g.run_id AND t.step = g.step AND t.time <= g.saved_at
    GROUP BY g.run_id
),
started AS (
    SELECT run_id, min(time) AS started_at,
           arg_min(coalesce(CAST(json_array_length(payload -> 'gpus') AS INTEGER),
                            TRY_CAST(payload ->> 'world_size' AS INTEGER)), time) AS gpus
    FROM lineage_events WHERE event = 'run_started' AND run_id IS NOT NULL GROUP BY run_id
)
SELECT $start AS partition_start, a.run_id,
       g.checkpoint AS last_good_checkpoint, g.step AS last_good_step, g.saved_at AS last_good_saved_at,
       p.last_step, p.last_step_at,
       p.last_step - coalesce(g.step, 0) AS steps_since_last_good,
       s.gpus,
       s.gpus * greatest(epoch(p.last_step_at - coalesce(d.done_at, g.saved_at, s.started_at)), 0) / 3600
           AS restart_cost_gpu_hours
FROM audited a
LEFT JOIN good g USING (run_id)
LEFT JOIN progress p USING (run_id)
LEFT JOIN good_done d USING (run_id)
LEFT JOIN started s USING (run_id);
