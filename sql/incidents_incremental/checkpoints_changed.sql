-- The saved checkpoints (sql/incidents_incremental/checkpoints.sql, filled in at the marker) that
-- are new, gone or audited otherwise since the fold saw them (fold_checkpoints): their run and time.
WITH now AS (/*@checkpoints*/)
SELECT run_id, time FROM (SELECT * FROM now EXCEPT ALL SELECT * FROM fold_checkpoints)
UNION ALL
SELECT run_id, time FROM (SELECT * FROM fold_checkpoints EXCEPT ALL SELECT * FROM now);
