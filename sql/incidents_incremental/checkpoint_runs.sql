-- The runs whose saved checkpoints (sql/incidents_incremental/checkpoints.sql) may differ from what the
-- fold saw (fold_checkpoints): their checkpoint_saved events differ (a count and a sum of row hashes
-- per run), or a checkpoint the fold saw has another latest audit status now. Every other run's rows
-- are the same as stored. A finding without a run takes no checkpoint: events without one are left out.
WITH audited AS (
    SELECT coalesce(recorded_path, path) AS checkpoint_path, arg_max(status, partition_start) AS status
    FROM checkpoint_audits
    GROUP BY ALL
),
now AS (
    SELECT run_id, count(*) AS n, sum(hash(time, checkpoint_path, step)) AS digest
    FROM lineage_events
    WHERE event = 'checkpoint_saved' AND run_id IS NOT NULL
    GROUP BY run_id
),
was AS (
    SELECT run_id, count(*) AS n, sum(hash(time, checkpoint_path, step)) AS digest
    FROM fold_checkpoints
    WHERE run_id IS NOT NULL
    GROUP BY run_id
)
SELECT coalesce(n.run_id, w.run_id) AS run_id
FROM now n FULL OUTER JOIN was w ON n.run_id = w.run_id
WHERE n.n IS DISTINCT FROM w.n OR n.digest IS DISTINCT FROM w.digest
UNION
SELECT c.run_id
FROM fold_checkpoints c
LEFT JOIN audited a ON a.checkpoint_path = c.checkpoint_path
WHERE a.status IS DISTINCT FROM c.status;
