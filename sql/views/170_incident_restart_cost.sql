-- incident_restart_cost: each incident on a run that the run restarted after (the first restart at or
-- after the incident's onset, before any later incident of the same kind), with that restart's cost.
CREATE OR REPLACE VIEW incident_restart_cost AS
SELECT i.incident_id, i.signal, i.tier, i.run_id, i.onset, i.checkpoint AS last_checkpoint_before_onset,
       x.attempt, x.restarted_at, x.resumed_from_checkpoint, x.resumed_from_step, x.last_step_before,
       x.wasted_progress_gpu_hours, x.startup_gpu_hours, x.crash_hang_gpu_hours, x.gpu_hours_lost
FROM incidents i
JOIN restart_badput x
  ON x.run_id = i.run_id
 AND x.restarted_at >= i.onset
 AND x.restarted_at = (SELECT min(y.restarted_at) FROM restart_badput y WHERE y.run_id = i.run_id AND y.restarted_at >= i.onset);
