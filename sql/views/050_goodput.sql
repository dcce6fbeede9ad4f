-- goodput: GPU-hours per run, team and UTC day, split into productive and wasted (busy but not
-- progressing, idle while allocated, lost to restarts). Sum it to any grain.
-- A run the badput asset has accounted (badput_minutes) is read from there, so this view and the
-- badput views agree: productive = productive, busy_not_progressing = hang, lost_to_restarts =
-- wasted progress + the start-up of restarted attempts, idle_allocated = every other category
-- (first start-up, checkpoint saves, evaluations, data stalls, slow steps, idle, unexplained).
-- Any other run is classified sample by sample from gpu_time (gpu_time_of: those runs' GPUs only).
CREATE OR REPLACE VIEW goodput AS
WITH accounted AS (
    SELECT coalesce(r.team, b.run_id) AS team, b.run_id, CAST(b.minute AS DATE) AS day,
           sum(b.allocated_gpu_seconds) / 3600                                                AS allocated_gpu_hours,
           sum(b.productive_gpu_seconds) / 3600                                               AS productive_gpu_hours,
           sum(b.hang_gpu_seconds) / 3600                                                     AS busy_not_progressing_gpu_hours,
           sum(b.wasted_progress_gpu_seconds + CASE WHEN b.attempt > 0 THEN b.startup_gpu_seconds ELSE 0 END) / 3600
                                                                                              AS lost_to_restarts_gpu_hours
    FROM badput_minutes b
    LEFT JOIN runs r USING (run_id)
    GROUP BY ALL
),
sampled AS (
    SELECT run_id,
           team,
           day,
           sum(sample_seconds) / 3600                                                        AS allocated_gpu_hours,
           coalesce(sum(sample_seconds) FILTER (category = 'productive'), 0) / 3600           AS productive_gpu_hours,
           coalesce(sum(sample_seconds) FILTER (category = 'busy_not_progressing'), 0) / 3600 AS busy_not_progressing_gpu_hours,
           coalesce(sum(sample_seconds) FILTER (category = 'idle_allocated'), 0) / 3600       AS idle_allocated_gpu_hours,
           coalesce(sum(sample_seconds) FILTER (category = 'lost_to_restarts'), 0) / 3600     AS lost_to_restarts_gpu_hours
    -- only the runs not accounted: gpu_time_of classifies their GPUs' samples and nothing else
    FROM gpu_time_of(coalesce((SELECT list(DISTINCT run_id) FROM gpu_samples
                               WHERE run_id NOT IN (SELECT DISTINCT run_id FROM badput_minutes)), []))
    GROUP BY run_id, team, day
),
both_ AS (
    SELECT run_id, team, day, allocated_gpu_hours, productive_gpu_hours, busy_not_progressing_gpu_hours,
           allocated_gpu_hours - productive_gpu_hours - busy_not_progressing_gpu_hours - lost_to_restarts_gpu_hours
               AS idle_allocated_gpu_hours,
           lost_to_restarts_gpu_hours
    FROM accounted
    UNION ALL BY NAME
    SELECT * FROM sampled
)
SELECT run_id,
       team,
       day,
       allocated_gpu_hours,
       productive_gpu_hours,
       busy_not_progressing_gpu_hours,
       idle_allocated_gpu_hours,
       lost_to_restarts_gpu_hours,
       allocated_gpu_hours - productive_gpu_hours               AS wasted_gpu_hours,
       productive_gpu_hours / nullif(allocated_gpu_hours, 0)    AS goodput_ratio
FROM both_;
