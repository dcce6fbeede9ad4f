-- Every finding, with its checkpoint: the one it names (checkpoint audits), else the run's last
-- checkpoint saved before the finding's onset whose latest audit PASSED (its lineage, and what its
-- playbook says to restart from: never one a correlated checkpoint incident calls damaged). A run
-- with no passed checkpoint before the onset gets its last one never audited (not on a configured
-- root), never one whose audit failed.
WITH audited AS (
    SELECT coalesce(recorded_path, path) AS checkpoint_path, arg_max(status, partition_start) AS status
    FROM checkpoint_audits
    GROUP BY ALL
),
-- The incremental fold reads `saved` from its own copy (fold_checkpoints) for its findings' runs only:
-- the markers bound what it replaces (assets/incidents_incremental.py _findings_sql).
saved AS (
    /*@saved*/SELECT l.run_id, l.time, l.checkpoint_path, l.step, a.status
    FROM lineage_events l
    LEFT JOIN audited a ON a.checkpoint_path = l.checkpoint_path
    WHERE l.event = 'checkpoint_saved'/*saved@*/
),
passed AS (SELECT * FROM saved WHERE status = 'ok'),
unaudited AS (SELECT * FROM saved WHERE status IS NULL OR status = 'not_audited')
SELECT f.signal, f.entity_type, f.entity_id, f.partition_start, f.onset, f.detected_at, f.last_seen,
       f.run_id, f.rank, f.hosts, f.gpus, f.value, f.baseline, f.threshold, f.evidence,
       f.endpoint, f.model_version, f.triage_class,
       coalesce(f.checkpoint, p.checkpoint_path, u.checkpoint_path) AS checkpoint,
       CASE WHEN p.checkpoint_path IS NOT NULL THEN p.step ELSE u.step END AS checkpoint_step
FROM findings f
ASOF LEFT JOIN passed p ON p.run_id = f.run_id AND p.time <= f.onset
ASOF LEFT JOIN unaudited u ON u.run_id = f.run_id AND u.time <= f.onset
ORDER BY f.signal, f.entity_id, f.detected_at, f.partition_start;
