-- serving_versions: which model version served each endpoint when, and where it came from. One row
-- per stint of a version on an endpoint: served_from (its promotion, or for a version served before
-- any promotion was recorded, its first serving metric or prediction), served_until (the next stint's
-- start; null while it serves), promoted_at, the version it replaced, and its lineage from the
-- model_version_registered event: training run, checkpoint step and path, when it was registered.
CREATE OR REPLACE VIEW serving_versions AS
WITH promoted AS (
    SELECT endpoint, model_version, time AS served_from, time AS promoted_at, run_id AS promoted_from_run
    FROM lineage_events
    WHERE event = 'model_version_promoted' AND endpoint IS NOT NULL AND model_version IS NOT NULL
),
seen AS (
    SELECT endpoint, model_version, min(time) AS first_seen
    FROM (SELECT endpoint, model_version, time FROM serving_metrics
          UNION ALL SELECT endpoint, model_version, time FROM predictions)
    WHERE model_version IS NOT NULL
    GROUP BY ALL
),
unpromoted AS (   -- served without a promotion on record (the version an endpoint started with)
    SELECT s.endpoint, s.model_version, s.first_seen AS served_from, NULL::TIMESTAMP AS promoted_at,
           NULL::VARCHAR AS promoted_from_run
    FROM seen s
    WHERE NOT EXISTS (SELECT 1 FROM promoted p WHERE p.endpoint = s.endpoint AND p.model_version = s.model_version
                                                 AND p.served_from <= s.first_seen)
),
registered AS (
    SELECT model_version,
           arg_min(run_id, time) AS run_id,
           arg_min(step, time) AS checkpoint_step,
           arg_min(checkpoint_path, time) AS checkpoint_path,
           min(time) AS registered_at
    FROM lineage_events
    WHERE event = 'model_version_registered' AND model_version IS NOT NULL
    GROUP BY model_version
),
stints AS (
    SELECT * FROM promoted
    UNION ALL BY NAME
    SELECT * FROM unpromoted
)
SELECT s.endpoint,
       s.model_version,
       s.served_from,
       lead(s.served_from) OVER w AS served_until,
       s.promoted_at,
       lag(s.model_version) OVER w AS previous_version,
       coalesce(r.run_id, s.promoted_from_run) AS run_id,
       r.checkpoint_step,
       r.checkpoint_path,
       r.registered_at
FROM stints s
LEFT JOIN registered r USING (model_version)
WINDOW w AS (PARTITION BY s.endpoint ORDER BY s.served_from, s.model_version)
ORDER BY s.endpoint, s.served_from;
