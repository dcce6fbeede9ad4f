-- The saved checkpoints of the runs of the findings read (`scope` in sql/incidents_incremental/
-- group_findings.sql), as the fold remembers them (fold_checkpoints: the `saved` rows of
-- sql/incidents/findings.sql, up to date once the fold has compared the lineage): no pass over the
-- whole lineage and every audit for a few findings. A finding without a run takes no checkpoint.
SELECT c.run_id, c.time, c.checkpoint_path, c.step, c.status
FROM fold_checkpoints c
WHERE c.run_id IN (SELECT run_id FROM scope)
