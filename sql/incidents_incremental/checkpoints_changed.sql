-- The saved checkpoints of the runs in the registered frame `changed_runs` (sql/incidents_incremental/
-- checkpoints.sql, filled in at the marker) that are new, gone or audited otherwise since the fold saw
-- them (fold_checkpoints): their run and time.
WITH now AS (/*@checkpoints*/),
was AS (SELECT * FROM fold_checkpoints WHERE run_id IN (SELECT run_id FROM changed_runs))
SELECT run_id, time FROM (SELECT * FROM now EXCEPT ALL SELECT * FROM was)
UNION ALL
SELECT run_id, time FROM (SELECT * FROM was EXCEPT ALL SELECT * FROM now);
