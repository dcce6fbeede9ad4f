-- One run's checkpoints: when, at which step, how big, and their latest audit (when audited).
WITH audit AS (
    SELECT coalesce(recorded_path, checkpoint) AS path, status
    FROM checkpoint_audits WHERE run_id = $run_id AND status <> 'not_audited'
    QUALIFY row_number() OVER (PARTITION BY checkpoint ORDER BY partition_start DESC) = 1
)
SELECT c.time AS saved_at, c.step, c.checkpoint_path,
       TRY_CAST(c.payload ->> 'checkpoint_bytes' AS BIGINT) AS checkpoint_bytes,
       (SELECT any_value(a.status) FROM audit a WHERE a.path = c.checkpoint_path) AS audit
FROM lineage_events c
WHERE c.event = 'checkpoint_saved' AND c.run_id = $run_id
ORDER BY c.time;
