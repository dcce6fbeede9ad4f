-- Per GPU held by a run and minute: utilization, power against its limit and against the GPU's own
-- trailing power while running, and tensor-pipe activity, from $lookback_minutes before the
-- partition to $end (`in_window` marks the partition's minutes). The detector groups by run.
-- With each row, the run's step progress: when it last logged a step at or before that minute within
-- the lookback (`run_last_step_time`, from run_minutes; a stall older than the lookback has its
-- episode open already) and how often it logs one (`log_interval_seconds`: the span of its records in
-- the lookback over their count), so a stall is told from a run that logs every few minutes. NULL for
-- runs that log no steps (inference, a job without a step log).
WITH g AS (
    SELECT host, gpu_index, minute, run_id, samples, utilization_ratio, power_watts, power_limit_watts,
           power_watts_baseline, tensor_active_ratio, sm_active_ratio
    FROM gpu_minutes
    WHERE run_id IS NOT NULL
      AND minute >= $start - to_minutes(CAST($lookback_minutes AS INTEGER)) AND minute < $end
), runs AS (
    SELECT DISTINCT run_id FROM g
), steps AS (
    SELECT run_id, minute, last_step_time, steps_completed
    FROM run_minutes SEMI JOIN runs USING (run_id)
    WHERE minute >= $start - to_minutes(CAST($lookback_minutes AS INTEGER)) AND minute < $end
      AND steps_completed > 0
), cadence AS (
    SELECT run_id, epoch(max(last_step_time) - min(last_step_time)) / nullif(sum(steps_completed) - 1, 0)
               AS log_interval_seconds
    FROM steps GROUP BY run_id
)
SELECT g.host, g.gpu_index, g.minute,
       g.minute + INTERVAL 1 MINUTE AS tick,
       g.minute + INTERVAL 1 MINUTE > $start AS in_window,
       g.run_id, g.samples, g.utilization_ratio, g.power_watts, g.power_limit_watts, g.power_watts_baseline,
       g.tensor_active_ratio, g.sm_active_ratio,
       p.last_step_time AS run_last_step_time, c.log_interval_seconds
FROM g
ASOF LEFT JOIN steps p ON p.run_id = g.run_id AND p.minute <= g.minute
LEFT JOIN cadence c ON c.run_id = g.run_id
ORDER BY g.run_id, g.minute, g.host, g.gpu_index;
