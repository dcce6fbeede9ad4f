-- Drift history of the model versions registered from run $run_id (for `goodput report`): the
-- run's models in production, and how their inputs and predictions moved.
SELECT d.endpoint, d.model_version, d.hour, d."column" AS column_name, d.kind, d.method, d.score, d.threshold, d.drifted
FROM drift_history d
WHERE d.model_version IN (SELECT model_version FROM lineage_events
                          WHERE event = 'model_version_registered' AND run_id = $run_id)
ORDER BY d.endpoint, d.model_version, d.column, d.hour;
