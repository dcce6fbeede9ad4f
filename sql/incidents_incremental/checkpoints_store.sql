-- Remember the saved checkpoints as they are now (sql/incidents_incremental/checkpoints.sql, filled
-- in at the marker), when some changed.
DELETE FROM fold_checkpoints;
INSERT INTO fold_checkpoints BY NAME /*@checkpoints*/;
