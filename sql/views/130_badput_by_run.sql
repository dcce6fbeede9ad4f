-- badput_by_run: where each run's GPU-hours went (badput_minutes summed over the run, all attempts),
-- with its effective training time ratio and its median model FLOPs utilization while stepping.
-- ettr = productive GPU-hours / (allocated GPU-hours + downtime GPU-hours): the minutes between its
-- first and last allocation in which it held no GPU (a crash until the restart) count at the GPUs it
-- held just before or just after, whichever is more, so downtime counts against ETTR although no GPU was held.
CREATE OR REPLACE VIEW badput_by_run AS
WITH downtime AS (
    SELECT run_id,
           sum(greatest(epoch(next_minute - minute) / 60 - 1, 0) * 60 * gap_gpus) / 3600 AS downtime_gpu_hours
    FROM (SELECT run_id, minute, gpus, lead(minute) OVER w AS next_minute,
                 greatest(gpus, lead(gpus) OVER w) AS gap_gpus
          FROM badput_minutes
          WINDOW w AS (PARTITION BY run_id ORDER BY minute))
    GROUP BY run_id
),
m AS (
    SELECT run_id,
           min(minute)                                  AS first_allocated,
           max(minute) + INTERVAL 1 MINUTE              AS last_allocated,
           max(attempt)                                 AS restarts,
           max(gpus)                                    AS gpus,
           sum(allocated_gpu_seconds) / 3600            AS allocated_gpu_hours,
           sum(productive_gpu_seconds) / 3600           AS productive_gpu_hours,
           sum(startup_gpu_seconds) / 3600              AS startup_gpu_hours,
           sum(checkpoint_save_gpu_seconds) / 3600      AS checkpoint_save_gpu_hours,
           sum(data_stall_gpu_seconds) / 3600           AS data_stall_gpu_hours,
           sum(evaluation_gpu_seconds) / 3600           AS evaluation_gpu_hours,
           sum(hang_gpu_seconds) / 3600                 AS hang_gpu_hours,
           sum(idle_gpu_seconds) / 3600                 AS idle_gpu_hours,
           sum(slow_steps_gpu_seconds) / 3600           AS slow_steps_gpu_hours,
           sum(wasted_progress_gpu_seconds) / 3600      AS wasted_progress_gpu_hours,
           sum(unexplained_gpu_seconds) / 3600          AS unexplained_gpu_hours,
           median(mfu) FILTER (steps_completed > 0)     AS mfu_median,
           any_value(gpu_name)                          AS gpu_name,
           any_value(precision)                         AS precision
    FROM badput_minutes
    GROUP BY run_id
)
SELECT m.run_id,
       coalesce(r.team, m.run_id) AS team,
       m.* EXCLUDE (run_id),
       m.allocated_gpu_hours - m.productive_gpu_hours AS badput_gpu_hours,
       m.productive_gpu_hours / nullif(m.allocated_gpu_hours, 0) AS goodput_ratio,
       d.downtime_gpu_hours,
       m.productive_gpu_hours / nullif(m.allocated_gpu_hours + d.downtime_gpu_hours, 0) AS ettr
FROM m
JOIN downtime d USING (run_id)
LEFT JOIN runs r USING (run_id);
