-- badput_by_team_day: the same breakdown per team and UTC day, with the team's ETTR that day
-- (productive GPU-hours over its allocated GPU-hours plus the downtime of its runs that day: minutes
-- between a run's first and last allocation with no GPU held, at the most GPUs it held just before or after).
CREATE OR REPLACE VIEW badput_by_team_day AS
WITH gaps AS (
    SELECT run_id, minute, lead(minute) OVER w AS next_minute, greatest(gpus, lead(gpus) OVER w) AS gap_gpus
    FROM badput_minutes
    WINDOW w AS (PARTITION BY run_id ORDER BY minute)
),
downtime AS (
    SELECT coalesce(r.team, g.run_id) AS team, CAST(g.minute AS DATE) AS day,
           sum(greatest(epoch(g.next_minute - g.minute) / 60 - 1, 0) * 60 * g.gap_gpus) / 3600 AS downtime_gpu_hours
    FROM gaps g LEFT JOIN runs r USING (run_id)
    GROUP BY ALL
),
sums AS (
    SELECT coalesce(r.team, b.run_id) AS team,
           CAST(b.minute AS DATE) AS day,
           count(DISTINCT b.run_id) AS runs,
           sum(b.allocated_gpu_seconds) / 3600        AS allocated_gpu_hours,
           sum(b.productive_gpu_seconds) / 3600       AS productive_gpu_hours,
           sum(b.startup_gpu_seconds) / 3600          AS startup_gpu_hours,
           sum(b.checkpoint_save_gpu_seconds) / 3600  AS checkpoint_save_gpu_hours,
           sum(b.data_stall_gpu_seconds) / 3600       AS data_stall_gpu_hours,
           sum(b.evaluation_gpu_seconds) / 3600       AS evaluation_gpu_hours,
           sum(b.hang_gpu_seconds) / 3600             AS hang_gpu_hours,
           sum(b.idle_gpu_seconds) / 3600             AS idle_gpu_hours,
           sum(b.slow_steps_gpu_seconds) / 3600       AS slow_steps_gpu_hours,
           sum(b.wasted_progress_gpu_seconds) / 3600  AS wasted_progress_gpu_hours,
           sum(b.unexplained_gpu_seconds) / 3600      AS unexplained_gpu_hours,
           median(b.mfu) FILTER (b.steps_completed > 0) AS mfu_median
    FROM badput_minutes b
    LEFT JOIN runs r USING (run_id)
    GROUP BY ALL
)
SELECT s.*,
       s.productive_gpu_hours / nullif(s.allocated_gpu_hours, 0) AS goodput_ratio,
       coalesce(d.downtime_gpu_hours, 0) AS downtime_gpu_hours,
       s.productive_gpu_hours / nullif(s.allocated_gpu_hours + coalesce(d.downtime_gpu_hours, 0), 0) AS ettr
FROM sums s
LEFT JOIN downtime d USING (team, day);
