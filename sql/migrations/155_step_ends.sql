-- When each training step ended, per run and minute: the time its last rank reported it in that minute
-- (issue 15: busy_not_progressing read 6 hours of per-rank step records at every tick, a cost that grew with
-- the ranks and the lookback, not with the new data; one row per step per minute is ~1/world_size of them).
-- The training baselines write it beside run_minutes, from the first minute ingest marked dirty
-- (sql/baselines/step_ends.sql); raw retention removes it with the step records (sql/maintenance/delete_raw.sql).
CREATE TABLE step_ends (
    run_id                        VARCHAR   NOT NULL,
    step                          BIGINT    NOT NULL,
    minute                        TIMESTAMP NOT NULL,
    time                          TIMESTAMP NOT NULL,
    PRIMARY KEY (run_id, step, minute)
);
INSERT INTO step_ends
SELECT run_id, step, time_bucket(INTERVAL 1 MINUTE, time) AS minute, max(time) AS time
FROM training_steps
GROUP BY ALL;
