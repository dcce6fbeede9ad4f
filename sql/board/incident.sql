-- One incident (a fold's or the monitor's), with the restart point of its run: the checkpoint it
-- names (the run's last save before onset), that save's step and time, and the run's newest
-- checkpoint that passed its audit (checkpoint_status), when audits ran.
WITH i AS (
    SELECT * FROM incidents WHERE incident_id = $incident_id
    UNION ALL BY NAME
    SELECT * FROM monitor_incidents WHERE incident_id = $incident_id
)
SELECT i.*,
       (SELECT max(c.step) FROM lineage_events c WHERE c.event = 'checkpoint_saved' AND c.run_id = i.run_id
                                                   AND c.checkpoint_path = i.checkpoint) AS checkpoint_step,
       (SELECT max(c.time) FROM lineage_events c WHERE c.event = 'checkpoint_saved' AND c.run_id = i.run_id
                                                   AND c.checkpoint_path = i.checkpoint) AS checkpoint_saved_at,
       s.last_good_checkpoint, s.last_good_step, s.restart_cost_gpu_hours, s.restart_cost_last_good_gpu_hours,
       s.audited_checkpoints, r.team, r.job, r.gpus AS run_gpus,
       (SELECT g.gpu_hours_at_risk FROM open_incident_groups g WHERE g.group_id = coalesce(i.correlation_id, i.incident_id))
           AS group_gpu_hours_at_risk
FROM i
LEFT JOIN checkpoint_status s ON s.run_id = i.run_id
LEFT JOIN runs r ON r.run_id = i.run_id;
