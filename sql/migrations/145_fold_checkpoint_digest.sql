-- The incident fold's checkpoint lineage follows what changed (issue 15): fold_meta keeps a digest of
-- the checkpoint_saved lineage events and the checkpoint audits as the last fold saw them
-- (sql/incidents_incremental/checkpoint_digest.sql); an equal digest skips the per-run comparison.
-- NULL (an existing home): the first fold compares every run once.
ALTER TABLE fold_meta ADD COLUMN checkpoints_digest UBIGINT;
