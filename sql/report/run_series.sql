-- One run's health per minute, for its plots (loss, step time, grad norm).
SELECT minute, loss, step_seconds, step_seconds_max, grad_norm, steps_completed, utilization_ratio, status
FROM run_health
WHERE run_id = $run_id
ORDER BY minute;
