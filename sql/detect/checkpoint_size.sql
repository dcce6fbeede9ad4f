-- Each checkpoint saved in the partition with its size (as lineage recorded it, else as audited on
-- disk), the median size of the same run's $predecessors previous checkpoints and the model
-- versions registered from it.
WITH saved AS (
    SELECT l.run_id, l.step, l.checkpoint_path, l.time AS saved_at,
           l.run_id || '/' || regexp_extract(rtrim(l.checkpoint_path, '/'), '[^/]+$') AS checkpoint,
           coalesce(TRY_CAST(l.payload ->> 'checkpoint_bytes' AS BIGINT),
                    (SELECT max(a.bytes) FROM checkpoint_audits a
                      WHERE a.recorded_path = l.checkpoint_path AND a.status <> 'not_audited')) AS checkpoint_bytes
    FROM lineage_events l
    WHERE l.event = 'checkpoint_saved' AND l.run_id IS NOT NULL AND l.checkpoint_path IS NOT NULL AND l.time < $end
),
versions AS (
    SELECT checkpoint_path, string_agg(DISTINCT model_version, ',' ORDER BY model_version) AS model_versions
    FROM lineage_events
    WHERE event = 'model_version_registered' AND time < $end AND model_version IS NOT NULL
    GROUP BY checkpoint_path
),
ranked AS (
    SELECT *, row_number() OVER (PARTITION BY run_id ORDER BY saved_at, step) AS n FROM saved
)
SELECT c.checkpoint, c.checkpoint_path, c.run_id, c.step, c.saved_at, c.saved_at AS tick, TRUE AS in_window, c.checkpoint_bytes,
       (SELECT median(p.checkpoint_bytes) FROM ranked p
         WHERE p.run_id = c.run_id AND p.n < c.n AND p.n >= c.n - CAST($predecessors AS INTEGER)) AS baseline_bytes,
       (SELECT count(p.checkpoint_bytes) FROM ranked p
         WHERE p.run_id = c.run_id AND p.n < c.n AND p.n >= c.n - CAST($predecessors AS INTEGER)) AS predecessors,
       v.model_versions
FROM ranked c
LEFT JOIN versions v USING (checkpoint_path)
WHERE c.saved_at >= $start
ORDER BY c.saved_at, c.checkpoint;
