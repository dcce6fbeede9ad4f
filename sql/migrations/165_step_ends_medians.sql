-- Each step's figures over its ranks, per minute, beside when it ended (issue 15: the badput asset grouped every
-- rank's step records of the hour so far and its 2-hour baseline window at every tick, ~1.5 of its ~2.4 CPU-s at
-- minute 55 of a 1,024-GPU hour). A row is the step's records in one minute: the medians the
-- badput asset takes per step (sql/badput/scope.sql). A step whose records all lie in one minute is that row; the
-- rest (ranks that straddle a minute, a minute a restart began in) are grouped from the records again there.
-- The backfill below is sql/baselines/step_ends.sql's insert as of this version, over every retained record: a
-- migration keeps the definition it was written with (as 155 did), so the two stay separate copies.
ALTER TABLE step_ends ADD COLUMN step_seconds DOUBLE;
ALTER TABLE step_ends ADD COLUMN data_seconds DOUBLE;
ALTER TABLE step_ends ADD COLUMN model_flops_per_second DOUBLE;
ALTER TABLE step_ends ADD COLUMN reported_flops_per_second DOUBLE;
DELETE FROM step_ends;
INSERT INTO step_ends BY NAME
SELECT run_id, step, time_bucket(INTERVAL 1 MINUTE, time) AS minute, max(time) AS time,
       median(step_seconds) AS step_seconds,
       median(data_seconds) AS data_seconds,
       median(tokens * coalesce(model_flops_per_token, 6.0 * parameters) / nullif(step_seconds, 0)) AS model_flops_per_second,
       median(tflops) * 1e12 AS reported_flops_per_second
FROM training_steps
GROUP BY run_id, step, minute;
