-- Replace [$from, $end) of step_ends: per run, step and minute, the time the step's last rank reported in
-- that minute, and the step's figures over the ranks that reported it in that minute (migration 165). A
-- minute's rows read only that minute's step records, so no lookback is read.
DELETE FROM step_ends WHERE minute >= $from AND minute < $end;
INSERT INTO step_ends BY NAME
SELECT run_id, step, time_bucket(INTERVAL 1 MINUTE, time) AS minute, max(time) AS time,
       median(step_seconds) AS step_seconds,
       median(data_seconds) AS data_seconds,
       median(tokens * coalesce(model_flops_per_token, 6.0 * parameters) / nullif(step_seconds, 0)) AS model_flops_per_second,
       median(tflops) * 1e12 AS reported_flops_per_second
FROM training_steps
WHERE time >= $from AND time < $end
GROUP BY run_id, step, minute;
SELECT count(*) FROM step_ends WHERE minute >= $start AND minute < $end;
