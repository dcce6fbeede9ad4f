-- One run's incidents with the checkpoint each one would restart from (the run's last save before
-- its onset) and that save's step.
SELECT i.incident_id, i.signal, i.tier, i.status, i.title, i.onset, i.opened, i.last_seen, i.resolved,
       i.gpu_hours_at_risk, i.owner, i.checkpoint,
       (SELECT max(c.step) FROM lineage_events c WHERE c.event = 'checkpoint_saved' AND c.run_id = i.run_id
                                                   AND c.checkpoint_path = i.checkpoint) AS checkpoint_step
FROM incidents i
WHERE i.run_id = $run_id
ORDER BY i.onset, i.incident_id;
