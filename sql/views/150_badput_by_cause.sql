-- badput_by_cause: every badput GPU-hour by run, UTC day, category and cause. The cause of slow steps,
-- data stalls and hangs is the incident that explains them where one does: an incident naming the
-- run, open during the minute, of a signal that explains the category (the most specific signal
-- first: a throttled GPU before the straggling rank it slows); otherwise the category itself. Start-up, checkpoint saves, evaluations,
-- idle time, wasted progress and unexplained time are their own cause.
CREATE OR REPLACE VIEW badput_by_cause AS
WITH long AS (
    SELECT run_id, minute, category, gpu_seconds
    FROM badput_minutes
    UNPIVOT (gpu_seconds FOR category IN (
        startup_gpu_seconds AS 'startup', checkpoint_save_gpu_seconds AS 'checkpoint_save',
        data_stall_gpu_seconds AS 'data_stall', evaluation_gpu_seconds AS 'evaluation',
        hang_gpu_seconds AS 'hang', idle_gpu_seconds AS 'idle', slow_steps_gpu_seconds AS 'slow_steps',
        wasted_progress_gpu_seconds AS 'wasted_progress', unexplained_gpu_seconds AS 'unexplained'))
    WHERE gpu_seconds > 0
),
explaining AS (
    -- which signals may explain which category, most specific first
    SELECT * FROM (VALUES
        ('slow_steps', 'gpu_throttle', 1), ('slow_steps', 'straggler_rank', 2), ('slow_steps', 'collective_regression', 3),
        ('slow_steps', 'mfu_drop', 4), ('slow_steps', 'step_time_regression', 5),
        ('data_stall', 'step_time_regression', 1),
        ('hang', 'rank_dropout', 1), ('hang', 'gpu_xid_error', 2), ('hang', 'busy_not_progressing', 3)
    ) AS e(category, signal, priority)
),
attributed AS (
    SELECT l.*,
           (SELECT arg_min(i.incident_id, e.priority) FROM incidents i JOIN explaining e ON e.signal = i.signal
             WHERE e.category = l.category AND i.run_id = l.run_id
               AND i.onset < l.minute + INTERVAL 1 MINUTE
               AND coalesce(i.resolved, i.last_seen) >= l.minute) AS incident_id
    FROM long l
)
SELECT a.run_id,
       coalesce(r.team, a.run_id) AS team,
       CAST(a.minute AS DATE) AS day,
       a.category,
       coalesce(i.signal, a.category) AS cause,
       a.incident_id,
       sum(a.gpu_seconds) / 3600 AS gpu_hours
FROM attributed a
LEFT JOIN incidents i USING (incident_id)
LEFT JOIN runs r ON r.run_id = a.run_id
GROUP BY ALL;
