-- After an hour of run_minutes was written: each run's first minute (run_starts) moves back to the
-- hour's first minute of the run where that is earlier (an older hour computed later: a backfill), and
-- a run seen for the first time gets one. [$start, $end): the partition.
UPDATE run_starts SET first_minute = h.first_minute
FROM (SELECT run_id, min(minute) AS first_minute FROM run_minutes WHERE minute >= $start AND minute < $end GROUP BY run_id) h
WHERE run_starts.run_id = h.run_id AND h.first_minute < run_starts.first_minute;
INSERT INTO run_starts
SELECT run_id, min(minute) FROM run_minutes
WHERE minute >= $start AND minute < $end AND run_id NOT IN (SELECT run_id FROM run_starts)
GROUP BY run_id;
