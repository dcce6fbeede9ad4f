-- The saved checkpoints of the runs in the registered frame `changed_runs`, each with its latest
-- audit status: what a finding's checkpoint is chosen from (the `saved` rows of
-- sql/incidents/findings.sql; keep the two alike).
WITH audited AS (
    SELECT coalesce(recorded_path, path) AS checkpoint_path, arg_max(status, partition_start) AS status
    FROM checkpoint_audits
    WHERE coalesce(recorded_path, path) IN (SELECT checkpoint_path FROM lineage_events
                                            WHERE event = 'checkpoint_saved' AND run_id IN (SELECT run_id FROM changed_runs))
    GROUP BY ALL
)
SELECT l.run_id, l.time, l.checkpoint_path, l.step, a.status
FROM lineage_events l
LEFT JOIN audited a ON a.checkpoint_path = l.checkpoint_path
WHERE l.event = 'checkpoint_saved' AND l.run_id IN (SELECT run_id FROM changed_runs);
