-- restarts: one row per restart of a run (a run_started event after the run's first). The restart
-- costs the time from the run's last step before it until the run first completes a step beyond
-- that one again (recovered_at): the downtime, the start-up and the replay of the steps done since
-- the checkpoint it resumed from. lost_until is recovered_at, or the end of the run's data (its
-- last step or GPU sample) if it never got back that far.
CREATE OR REPLACE VIEW restarts AS
WITH starts AS (
    SELECT run_id, time AS restarted_at,
           row_number() OVER (PARTITION BY run_id ORDER BY time, source_file, source_line) - 1 AS attempt
    FROM lineage_events
    WHERE event = 'run_started' AND run_id IS NOT NULL
),
r AS (
    SELECT s.run_id, s.attempt, s.restarted_at,
           (SELECT max(t.step) FROM training_steps t WHERE t.run_id = s.run_id AND t.time < s.restarted_at) AS last_step_before,
           (SELECT max(t.time) FROM training_steps t WHERE t.run_id = s.run_id AND t.time < s.restarted_at) AS last_step_time_before,
           (SELECT min(t.step) FROM training_steps t WHERE t.run_id = s.run_id AND t.time >= s.restarted_at) AS first_step_after
    FROM starts s
    WHERE s.attempt > 0
)
SELECT r.run_id,
       r.attempt,
       r.restarted_at,
       r.last_step_before,
       r.last_step_time_before,
       r.first_step_after - 1 AS resumed_from_step,
       (SELECT arg_max(c.checkpoint_path, c.time) FROM lineage_events c
         WHERE c.event = 'checkpoint_saved' AND c.run_id = r.run_id AND c.time < r.restarted_at
           AND c.step <= r.first_step_after - 1) AS resumed_from_checkpoint,
       greatest(r.last_step_before - (r.first_step_after - 1), 0) AS steps_lost,
       (SELECT min(t.time) FROM training_steps t
         WHERE t.run_id = r.run_id AND t.time >= r.restarted_at AND t.step > r.last_step_before) AS recovered_at,
       coalesce(r.last_step_time_before, r.restarted_at) AS lost_from,
       coalesce(
           (SELECT min(t.time) FROM training_steps t
             WHERE t.run_id = r.run_id AND t.time >= r.restarted_at AND t.step > r.last_step_before),
           -- never back where it was (yet): everything the run held since counts
           greatest((SELECT max(t.time) FROM training_steps t WHERE t.run_id = r.run_id),
                    (SELECT max(g.time) + INTERVAL 1 SECOND FROM gpu_samples g WHERE g.run_id = r.run_id)),
           r.restarted_at) AS lost_until
FROM r;
