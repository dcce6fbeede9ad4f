-- badput_by_team_day: the same breakdown per team and UTC day, with the team's ETTR that day
-- (productive GPU-hours over the GPU-hours its runs' wall time spans that day, downtime included).
CREATE OR REPLACE VIEW badput_by_team_day AS
WITH spans AS (
    SELECT run_id, team, gpus, first_allocated, last_allocated FROM badput_by_run
),
days AS (
    SELECT s.*, d.day
    FROM spans s,
         LATERAL (SELECT CAST(unnest(range(CAST(s.first_allocated AS DATE), CAST(s.last_allocated AS DATE) + 1, INTERVAL 1 DAY)) AS DATE) AS day) d
),
wall AS (
    SELECT team, day,
           sum(gpus * epoch(least(last_allocated, CAST(day AS TIMESTAMP) + INTERVAL 1 DAY)
                            - greatest(first_allocated, CAST(day AS TIMESTAMP))) / 3600) AS wall_gpu_hours
    FROM days GROUP BY ALL
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
       s.productive_gpu_hours / nullif(w.wall_gpu_hours, 0) AS ettr
FROM sums s
LEFT JOIN wall w USING (team, day);
