-- One run's restarts and what each cost.
SELECT attempt, restarted_at, last_step_before, resumed_from_step, resumed_from_checkpoint, steps_lost, recovered_at,
       lost_seconds, gpu_hours_lost
FROM restart_cost
WHERE run_id = $run_id
ORDER BY attempt;
