-- mfu_drop's frame: a run's model FLOPs utilization per minute (from `badput_minutes`), for every run
-- with MFU in [$start, $end), plus $lookback_minutes of history before $start (rows with `in_window`
-- false: they feed the trailing baseline and persistence but are not reported). `tick` = minute + 1 minute.
WITH runs AS (
    SELECT DISTINCT run_id FROM badput_minutes WHERE minute >= $start AND minute < $end AND mfu IS NOT NULL
), placement AS (
    SELECT run_id,
           list(DISTINCT host ORDER BY host) AS hosts,
           list(DISTINCT host || ':' || gpu_index ORDER BY host || ':' || gpu_index) AS gpus
    FROM training_steps SEMI JOIN runs USING (run_id)
    WHERE time >= $start AND time < $end AND host IS NOT NULL AND gpu_index IS NOT NULL
    GROUP BY run_id
)
SELECT b.run_id, b.minute,
       b.minute + INTERVAL 1 MINUTE AS tick, b.minute >= $start AS in_window,
       b.mfu, b.mfu_from_model_flops, b.mfu_from_reported_tflops, b.steps_completed,
       b.peak_flops_per_gpu, b.gpu_name, b.precision, b.gpus AS gpu_count,
       b.slow_steps_gpu_seconds, b.data_stall_gpu_seconds, b.allocated_gpu_seconds,
       coalesce(p.hosts, []) AS hosts, coalesce(p.gpus, []) AS gpus
FROM badput_minutes b
SEMI JOIN runs USING (run_id)
LEFT JOIN placement p USING (run_id)
WHERE b.minute >= $start - to_minutes(CAST($lookback_minutes AS INTEGER)) AND b.minute < $end
ORDER BY b.run_id, b.minute;
