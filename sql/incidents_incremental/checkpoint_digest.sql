-- One digest of what a finding's checkpoint is chosen from (sql/incidents_incremental/checkpoints.sql):
-- the checkpoint_saved lineage events with a run and every checkpoint audit, each as a count and a sum
-- of row hashes (a sum, not a xor: a row written twice changes it). The same digest as the last
-- fold's (fold_meta): no finding's checkpoint changed, and the fold compares nothing per run. One
-- pass over the columns it hashes, no join.
SELECT hash((SELECT (count(*), coalesce(sum(hash(run_id, time, checkpoint_path, step)), 0))
             FROM lineage_events WHERE event = 'checkpoint_saved' AND run_id IS NOT NULL),
            (SELECT (count(*), coalesce(sum(hash(coalesce(recorded_path, path), partition_start, status)), 0))
             FROM checkpoint_audits)) AS digest;
