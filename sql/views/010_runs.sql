-- runs: one row per training run, from its lineage (run_started / run_ended) and its step records.
-- team is the run_started record's `team`, else its `job`, else the run id. restarts counts the
-- run_started events after the first. gpus is the GPUs the launcher named (else the world size).
CREATE OR REPLACE VIEW runs AS
WITH ids AS (
    SELECT run_id FROM lineage_events WHERE run_id IS NOT NULL
    UNION
    SELECT run_id FROM training_steps
),
started AS (
    SELECT run_id,
           min(time)             AS started,
           max(time)             AS last_started,
           count(*)              AS attempts,
           arg_min(payload, time) AS payload
    FROM lineage_events
    WHERE event = 'run_started' AND run_id IS NOT NULL
    GROUP BY run_id
),
ended AS (
    SELECT run_id, max(time) AS ended, arg_max(payload ->> 'status', time) AS end_status
    FROM lineage_events
    WHERE event = 'run_ended' AND run_id IS NOT NULL
    GROUP BY run_id
),
steps AS (
    SELECT run_id, min(time) AS first_step_at, max(time) AS last_step_at, max(step) AS last_step,
           max(world_size) AS world_size
    FROM training_steps
    GROUP BY run_id
)
SELECT ids.run_id,
       coalesce(st.payload ->> 'team', st.payload ->> 'job', ids.run_id)             AS team,
       st.payload ->> 'job'                                                          AS job,
       st.payload ->> 'dataset'                                                      AS dataset,
       st.payload ->> 'git_sha'                                                      AS git_sha,
       st.payload ->> 'config_hash'                                                  AS config_hash,
       coalesce(TRY_CAST(st.payload ->> 'world_size' AS INTEGER), sp.world_size)     AS world_size,
       coalesce(CAST(json_array_length(st.payload -> 'gpus') AS INTEGER),
                TRY_CAST(st.payload ->> 'world_size' AS INTEGER), sp.world_size)     AS gpus,
       st.started,
       greatest(coalesce(st.attempts, 0) - 1, 0)                                    AS restarts,
       -- a run_ended before the latest (re)start belongs to an earlier attempt
       CASE WHEN en.ended >= coalesce(st.last_started, en.ended) THEN en.ended END   AS ended,
       CASE WHEN en.ended >= coalesce(st.last_started, en.ended) THEN en.end_status END AS end_status,
       sp.first_step_at,
       sp.last_step_at,
       sp.last_step
FROM ids
LEFT JOIN started st USING (run_id)
LEFT JOIN ended en USING (run_id)
LEFT JOIN steps sp USING (run_id);
