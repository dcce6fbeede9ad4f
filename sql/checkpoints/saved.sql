-- Checkpoints lineage knows of, as of the partition's end: every checkpoint_saved before $end, with
-- whether it was saved in the partition (is_new), its rank among the run's checkpoints saved before
-- the partition (newest_before = 1: the newest), and the model versions registered from it so far.
WITH saved AS (
    SELECT run_id, step, checkpoint_path, time AS saved_at,
           TRY_CAST(payload ->> 'checkpoint_bytes' AS BIGINT) AS recorded_bytes,
           payload -> 'manifest'                               AS manifest,
           time >= $start                                      AS is_new
    FROM lineage_events
    WHERE event = 'checkpoint_saved' AND checkpoint_path IS NOT NULL AND time < $end
    QUALIFY row_number() OVER (PARTITION BY checkpoint_path ORDER BY time DESC) = 1
),
versions AS (
    SELECT checkpoint_path, string_agg(DISTINCT model_version, ',' ORDER BY model_version) AS model_versions
    FROM lineage_events
    WHERE event = 'model_version_registered' AND time < $end AND model_version IS NOT NULL
    GROUP BY checkpoint_path
)
SELECT s.run_id, s.step, s.checkpoint_path, s.saved_at, s.recorded_bytes, CAST(s.manifest AS VARCHAR) AS manifest,
       s.is_new,
       CASE WHEN NOT s.is_new THEN row_number() OVER (
           PARTITION BY s.run_id, s.is_new ORDER BY s.saved_at DESC, s.step DESC) END AS newest_before,
       v.model_versions
FROM saved s
LEFT JOIN versions v USING (checkpoint_path)
ORDER BY s.saved_at, s.checkpoint_path;
