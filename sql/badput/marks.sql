-- Badput, part 4 of 5: from which minute this run writes. bp_marks fingerprints, per run and minute, every input
-- whose change can alter that minute's row or a later one's (migration 170), each at the first minute it reaches:
--   a held sample's interval      its own minute (its GPUs, interval, utilization)
--   a window or gap               the first minute whose sample intervals it may cover (its start less the
--                                 longest interval), so a gap that a new step closes reaches back to its start
--   a step                        its minute (its figures, its baseline, whether a restart discarded it)
--   a (re)start                   its minute (the attempt and precision of the minutes from then on)
--   the parameters and SQL        the first minute written ($version; run_id '')
-- Inputs before the first minute written count at it. A live run ($live) writes from the first minute whose
-- fingerprint differs from the stored one (a minute without one differs); every other run writes the whole
-- hour. A restart's rewrite (bp_rewrite) always writes whole. The two minutes before $start and the last two of
-- the hour are always written: the neighbouring partitions write them too.
CREATE OR REPLACE TEMP TABLE bp_marks AS
WITH reach AS (
    SELECT to_microseconds(CAST(coalesce(max(slot_seconds), 0) * 1e6 AS BIGINT)) AS longest FROM bp_slots
),
items AS (
    SELECT run_id, minute,
           hash(time, slot_seconds, rank_gpus, spare_gpus, round(utilization, 9), gpu_name) AS h
    FROM bp_slots
    UNION ALL
    SELECT run_id, time_bucket(INTERVAL 1 MINUTE, w0 - (SELECT longest FROM reach)), hash(w0, w1, category, round(weight, 12))
    FROM (SELECT * FROM bp_windows UNION ALL SELECT * FROM bp_gaps)
    UNION ALL
    SELECT run_id, minute, hash(s) FROM bp_steps s
    UNION ALL
    SELECT run_id, time_bucket(INTERVAL 1 MINUTE, started_at), hash(attempt, started_at, precision)
    FROM bp_attempts WHERE run_id IN (SELECT DISTINCT run_id FROM bp_slots)
    UNION ALL
    SELECT '', $start - INTERVAL 2 MINUTE, hash($version)
)
SELECT run_id, greatest(minute, $start - INTERVAL 2 MINUTE) AS minute, CAST(sum(h) AS VARCHAR) AS fingerprint
FROM items
WHERE minute < $end
GROUP BY ALL;

SELECT CASE WHEN NOT $live OR EXISTS (SELECT 1 FROM bp_rewrite) THEN $read_from
            ELSE least(coalesce(min(coalesce(n.minute, o.minute)), $end), $end - INTERVAL 2 MINUTE) END AS write_from
FROM bp_marks n
FULL JOIN (SELECT run_id, minute, fingerprint FROM badput_marks WHERE partition_start = $start) o USING (run_id, minute)
WHERE n.fingerprint IS DISTINCT FROM o.fingerprint;
