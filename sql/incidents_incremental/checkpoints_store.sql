-- Remember the saved checkpoints of the runs in the registered frame `changed_runs` as they are now
-- (sql/incidents_incremental/checkpoints.sql, filled in at the marker); every other run's are unchanged.
DELETE FROM fold_checkpoints WHERE run_id IN (SELECT run_id FROM changed_runs);
INSERT INTO fold_checkpoints BY NAME /*@checkpoints*/;
