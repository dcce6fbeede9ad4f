-- Badput, part 1 of 5: which (re)starts the partition sees and how far back it writes. Temp tables,
-- connection-local:
--   bp_attempts  every (re)start of every run (run_started events)
--   bp_rewrite   runs whose restart completed its first step in [$start, $end): the minutes since the
--                first step it recomputes are rewritten too (they turn into wasted progress)
CREATE OR REPLACE TEMP TABLE bp_attempts AS
SELECT run_id,
       time AS started_at,
       CAST(row_number() OVER w - 1 AS INTEGER) AS attempt,
       lead(time) OVER w AS next_started_at,
       coalesce(payload ->> 'precision', $default_precision) AS precision
FROM lineage_events
WHERE event = 'run_started' AND run_id IS NOT NULL
WINDOW w AS (PARTITION BY run_id ORDER BY time, source_file, source_line);

CREATE OR REPLACE TEMP TABLE bp_rewrite AS
WITH firsts AS (
    SELECT a.run_id, a.attempt,
           (SELECT arg_min(t.step, t.time) FROM training_steps t
             WHERE t.run_id = a.run_id AND t.time >= a.started_at
               AND t.time < coalesce(a.next_started_at, $end + INTERVAL 10 MINUTE)) AS first_step,
           (SELECT min(t.time) FROM training_steps t
             WHERE t.run_id = a.run_id AND t.time >= a.started_at
               AND t.time < coalesce(a.next_started_at, $end + INTERVAL 10 MINUTE)) AS first_time
    FROM bp_attempts a
    WHERE a.attempt > 0 AND a.started_at < $end AND a.started_at >= $start - INTERVAL 1 DAY
)
SELECT f.run_id,
       time_bucket(INTERVAL 1 MINUTE, min(t.time - to_microseconds(CAST(coalesce(t.step_seconds, 0) * 1e6 AS BIGINT)))) AS write_from
FROM firsts f
JOIN training_steps t ON t.run_id = f.run_id AND t.step >= f.first_step AND t.time < f.first_time
                     AND t.time >= f.first_time - INTERVAL 1 DAY
WHERE f.first_time >= $start AND f.first_time < $end
GROUP BY f.run_id
HAVING min(t.time) < $start;

-- How far back this partition writes: every partition rewrites the previous hour's last two minutes (a
-- step or a sample interval that straddles the hour is only whole once the next hour is ingested), and
-- a restart's rewrite reaches back to the first step it computed again. assets/badput.py passes it to
-- the next stages as $read_from: a constant, so their scans of the raw tables keep to that window
-- (a subquery there would scan every retained row, and the cost would grow with the history kept).
SELECT least($start - INTERVAL 2 MINUTE, coalesce((SELECT min(write_from) FROM bp_rewrite), $start)) AS read_from;

