-- Every finding, with its checkpoint: the one it names (checkpoint audits), else the run's last
-- checkpoint saved before the finding's onset whose latest audit PASSED (its lineage, and what its
-- playbook says to restart from: never one a correlated checkpoint incident calls damaged, nor
-- one not yet audited).
WITH audited AS (
    SELECT coalesce(recorded_path, path) AS checkpoint_path, arg_max(status, partition_start) AS status
    FROM checkpoint_audits
    GROUP BY ALL
),
checkpoints AS (
    SELECT l.run_id, l.time, l.checkpoint_path, l.step
    FROM lineage_events l
    JOIN audited a ON a.checkpoint_path = l.checkpoint_path AND a.status = 'ok'
    WHERE l.event = 'checkpoint_saved'
)
SELECT f.signal, f.entity_type, f.entity_id, f.partition_start, f.onset, f.detected_at, f.last_seen,
       f.run_id, f.rank, f.hosts, f.gpus, f.value, f.baseline, f.threshold, f.evidence,
       f.endpoint, f.model_version, f.triage_class,
       coalesce(f.checkpoint, c.checkpoint_path) AS checkpoint, c.step AS checkpoint_step
FROM findings f
ASOF LEFT JOIN checkpoints c ON c.run_id = f.run_id AND c.time <= f.onset
ORDER BY f.signal, f.entity_id, f.detected_at, f.partition_start;
