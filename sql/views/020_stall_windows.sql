-- stall_windows: the stretches in which a run held its GPUs and completed no step, from the
-- incidents of the signals that mean exactly that. A stall starts at the incident's onset (the last
-- completed step) and ends when the run completes its next step, or when the incident was last
-- seen (resolved, if it was) if the run never progressed again. Add a signal to the list below
-- when its incidents mean "no step completes".
CREATE OR REPLACE VIEW stall_windows AS
SELECT i.incident_id,
       i.signal,
       i.run_id,
       i.onset AS stall_start,
       least(
           coalesce((SELECT min(t.time) FROM training_steps t WHERE t.run_id = i.run_id AND t.time > i.onset),
                    coalesce(i.resolved, i.last_seen)),
           coalesce(i.resolved, i.last_seen)
       ) AS stall_end
FROM incidents i
WHERE i.run_id IS NOT NULL
  AND i.signal IN ('busy_not_progressing', 'rank_dropout');
