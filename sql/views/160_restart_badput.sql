-- restart_badput: what each restart cost in GPU-hours, from badput_minutes: the progress computed
-- again (wasted since the checkpoint it restarted from), its start-up (checkpoint restore included)
-- and the spin of the crashed job until it failed (hang between the attempt's last step and the
-- restart). gpu_hours_lost = wasted progress + start-up, the issue's "what a restart costs";
-- incident_restart_cost puts the figure on the disruption incident that preceded it.
CREATE OR REPLACE VIEW restart_badput AS
WITH attempts AS (
    SELECT run_id, attempt, min(minute) AS attempt_from, max(minute) + INTERVAL 1 MINUTE AS attempt_until
    FROM badput_minutes GROUP BY ALL
),
costs AS (
    SELECT x.run_id, x.attempt, x.restarted_at, x.resumed_from_step, x.resumed_from_checkpoint, x.last_step_before,
           (SELECT sum(b.wasted_progress_gpu_seconds) FROM badput_minutes b
             WHERE b.run_id = x.run_id AND b.attempt = x.attempt - 1) / 3600 AS wasted_progress_gpu_hours,
           (SELECT sum(b.startup_gpu_seconds) FROM badput_minutes b
             WHERE b.run_id = x.run_id AND b.attempt = x.attempt) / 3600 AS startup_gpu_hours,
           (SELECT sum(b.hang_gpu_seconds) FROM badput_minutes b
             WHERE b.run_id = x.run_id AND b.attempt = x.attempt - 1
               AND b.minute >= time_bucket(INTERVAL 1 MINUTE, coalesce(x.last_step_time_before, x.restarted_at))) / 3600
               AS crash_hang_gpu_hours
    FROM restarts x
)
SELECT c.*,
       coalesce(c.wasted_progress_gpu_hours, 0) + coalesce(c.startup_gpu_hours, 0) AS gpu_hours_lost
FROM costs c;
