-- Each run's first minute in run_minutes (issue 15: the detectors judge a run's warm-up by its age, and
-- reading that from the run's every minute made a tick's cost grow with the run's history). The training
-- baselines keep it as they write run_minutes (sql/baselines/run_starts.sql): the earliest minute any hour
-- computed so far holds, in whatever order the hours were computed. Retention removes a run's row once none
-- of its minutes are kept (sql/maintenance/delete_minutes.sql).
CREATE TABLE run_starts (
    run_id                        VARCHAR   PRIMARY KEY,
    first_minute                  TIMESTAMP NOT NULL
);
INSERT INTO run_starts SELECT run_id, min(minute) FROM run_minutes GROUP BY run_id;
