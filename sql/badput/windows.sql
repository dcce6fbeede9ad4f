-- Badput, part 3 of 5: the run's timeline as windows, each with the categories its time goes to
-- (category, weight; the weights of one window sum to 1), then the gaps between them.
--   step            productive, less the data stall, slow-step and hang shares of the step (or all of it
--                   wasted progress, if a later restart computed the step again)
--   startup         run_started -> the attempt's first step start (restore included)
--   checkpoint_save the run stood still saving: save_seconds before checkpoint_saved if logged, else
--                   from the last step's end (or a logged evaluation's end) to the event
--   evaluation      eval_seconds before an `evaluation` event
--   gap             the rest: hang when the GPUs stay busy for longer than the hang threshold,
--                   idle when they are not busy, unexplained otherwise (or with no utilization)
CREATE OR REPLACE TEMP TABLE bp_step_windows AS
WITH shares AS (
    SELECT run_id, step_start AS w0, step_end AS w1, discarded, step_seconds,
           CASE WHEN step_seconds > hang_threshold_seconds
                THEN step_seconds - ideal_step_seconds ELSE 0 END AS hang_s,
           CASE WHEN step_seconds <= hang_threshold_seconds
                 AND data_seconds - data_baseline_seconds > greatest($noise_z * coalesce(data_sigma, 0), $min_excess_ratio * ideal_step_seconds)
                THEN data_seconds - data_baseline_seconds ELSE 0 END AS data_s,
           CASE WHEN step_seconds <= hang_threshold_seconds
                 AND step_seconds - data_seconds - ideal_other_seconds > greatest($noise_z * coalesce(other_sigma, 0), $min_excess_ratio * ideal_step_seconds)
                THEN step_seconds - data_seconds - ideal_other_seconds ELSE 0 END AS slow_s
    FROM bp_steps
    WHERE step_end > step_start
)
SELECT run_id, w0, w1, category, weight
FROM shares,
     LATERAL (VALUES
        ('wasted_progress', CASE WHEN discarded THEN 1.0 ELSE 0.0 END),
        ('hang',       CASE WHEN discarded THEN 0.0 ELSE least(hang_s / step_seconds, 1.0) END),
        ('data_stall', CASE WHEN discarded THEN 0.0 ELSE least(data_s / step_seconds, 1.0) END),
        ('slow_steps', CASE WHEN discarded THEN 0.0 ELSE least(slow_s / step_seconds, 1.0) END),
        ('productive', CASE WHEN discarded THEN 0.0
                            ELSE greatest(1.0 - (hang_s + data_s + slow_s) / step_seconds, 0.0) END)
     ) AS v(category, weight)
WHERE weight > 0;

CREATE OR REPLACE TEMP TABLE bp_windows AS
WITH firsts AS (
    SELECT run_id, attempt, min(step_start) AS first_start FROM bp_steps GROUP BY ALL
),
startup AS (
    SELECT a.run_id, a.started_at AS w0,
           coalesce(f.first_start, a.next_started_at, TIMESTAMP '9999-12-31') AS w1
    FROM bp_attempts a
    LEFT JOIN firsts f USING (run_id, attempt)
    WHERE a.run_id IN (SELECT DISTINCT run_id FROM bp_slots)
),
evals AS (
    SELECT run_id, time - to_microseconds(CAST(TRY_CAST(payload ->> 'eval_seconds' AS DOUBLE) * 1e6 AS BIGINT)) AS w0, time AS w1
    FROM lineage_events
    WHERE event = 'evaluation' AND TRY_CAST(payload ->> 'eval_seconds' AS DOUBLE) > 0
      AND run_id IN (SELECT DISTINCT run_id FROM bp_slots)
      AND time >= $read_from - to_minutes($baseline_minutes) AND time < $end + INTERVAL 10 MINUTE
),
saves AS (
    SELECT e.run_id, e.time AS saved_at,
           TRY_CAST(e.payload ->> 'save_seconds' AS DOUBLE) AS save_seconds,
           (SELECT max(s.step_end) FROM bp_steps s WHERE s.run_id = e.run_id AND s.step_end <= e.time) AS prev_end,
           (SELECT min(s.step_start) FROM bp_steps s WHERE s.run_id = e.run_id AND s.step_end > e.time) AS next_start
    FROM lineage_events e
    WHERE e.event = 'checkpoint_saved' AND e.run_id IN (SELECT DISTINCT run_id FROM bp_slots)
      AND e.time >= $read_from - to_minutes($baseline_minutes) AND e.time < $end + INTERVAL 10 MINUTE
),
save_windows AS (
    -- an asynchronous save that overlaps the next steps only stood the run still until they began
    SELECT s.run_id,
           greatest(coalesce(s.saved_at - to_microseconds(CAST(s.save_seconds * 1e6 AS BIGINT)),
                             greatest(s.prev_end, coalesce((SELECT max(v.w1) FROM evals v
                                                             WHERE v.run_id = s.run_id AND v.w1 <= s.saved_at AND v.w1 > s.prev_end), s.prev_end))),
                    coalesce(s.prev_end, s.saved_at)) AS w0,
           least(s.saved_at, coalesce(s.next_start, s.saved_at)) AS w1
    FROM saves s
)
SELECT run_id, w0, w1, category, weight FROM bp_step_windows
UNION ALL SELECT run_id, w0, w1, 'startup', 1.0 FROM startup WHERE w1 > w0
UNION ALL SELECT run_id, w0, w1, 'evaluation', 1.0 FROM evals WHERE w1 > w0
UNION ALL SELECT run_id, w0, w1, 'checkpoint_save', 1.0 FROM save_windows WHERE w1 > w0;

-- Gaps: what no window covers, between the first and the last held sample of the run.
CREATE OR REPLACE TEMP TABLE bp_gaps AS
WITH held AS (
    SELECT run_id, min(time) AS h0, max(time + to_microseconds(CAST(slot_seconds * 1e6 AS BIGINT))) AS h1
    FROM bp_slots GROUP BY run_id
),
edges AS (
    SELECT DISTINCT run_id, w0, w1 FROM bp_windows
    UNION ALL SELECT run_id, h0, h0 FROM held
    UNION ALL SELECT run_id, h1, h1 FROM held
),
ordered AS (
    SELECT run_id, w0, w1,
           max(w1) OVER (PARTITION BY run_id ORDER BY w0, w1 ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS covered_until
    FROM edges
),
gaps AS (
    SELECT o.run_id, o.covered_until AS g0, o.w0 AS g1
    FROM ordered o JOIN held h USING (run_id)
    WHERE o.w0 > o.covered_until AND o.w0 > h.h0 AND o.covered_until < h.h1
),
busy AS (
    SELECT g.run_id, g.g0, g.g1, avg(s.utilization) AS utilization
    FROM gaps g LEFT JOIN bp_slots s ON s.run_id = g.run_id AND s.time >= g.g0 AND s.time < g.g1
    GROUP BY ALL
)
SELECT b.run_id, b.g0 AS w0, b.g1 AS w1,
       CASE WHEN b.utilization IS NULL THEN 'unexplained'
            WHEN b.utilization < $busy_utilization THEN 'idle'
            WHEN epoch(b.g1 - b.g0) >= coalesce(t.hang_threshold_seconds, $hang_min_seconds) THEN 'hang'
            ELSE 'unexplained' END AS category,
       1.0 AS weight
FROM busy b
ASOF LEFT JOIN (SELECT run_id, step_end, hang_threshold_seconds FROM bp_steps WHERE hang_threshold_seconds IS NOT NULL) t
     ON t.run_id = b.run_id AND b.g0 >= t.step_end;
