-- restart_cost: what each restart cost (see restarts): the steps replayed, the downtime until the
-- run was back where it had been, and the GPU-hours its GPUs spent on that (from gpu_time, of the restarted runs' GPUs only).
CREATE OR REPLACE VIEW restart_cost AS
SELECT x.run_id,
       r.team,
       x.attempt,
       x.restarted_at,
       x.last_step_before,
       x.resumed_from_step,
       x.resumed_from_checkpoint,
       x.steps_lost,
       x.recovered_at,
       epoch(x.lost_until - x.lost_from) AS lost_seconds,
       coalesce((SELECT sum(g.sample_seconds) FROM gpu_time_of(coalesce((SELECT list(DISTINCT run_id) FROM restarts), [])) g
                  WHERE g.run_id = x.run_id AND g.category = 'lost_to_restarts'
                    AND g.time >= x.lost_from AND g.time < x.lost_until), 0) / 3600 AS gpu_hours_lost
FROM restarts x
LEFT JOIN runs r USING (run_id);
