-- Replace [$from, $end) of step_ends: per run, step and minute, the time the step's last rank reported in
-- that minute. A minute's rows read only that minute's step records, so no lookback is read.
DELETE FROM step_ends WHERE minute >= $from AND minute < $end;
INSERT INTO step_ends
SELECT run_id, step, time_bucket(INTERVAL 1 MINUTE, time) AS minute, max(time) AS time
FROM training_steps
WHERE time >= $from AND time < $end
GROUP BY ALL;
SELECT count(*) FROM step_ends WHERE minute >= $start AND minute < $end;
