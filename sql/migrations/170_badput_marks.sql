-- What each badput partition's minutes were computed from (issue 15: the badput asset split every held sample of
-- the hour so far at every tick). Per run and minute, a fingerprint (a sum of hashes, as text) of every input
-- whose change can alter that minute's row or a later one's: its held samples, the windows and gaps that may
-- cover them (at the first minute they may reach), its steps, the run's (re)starts; and one row (run_id '') for
-- the asset's parameters and SQL. A live run recomputes and writes from the first minute whose fingerprint
-- changed (sql/badput/marks.sql); every run stores the partition's marks anew. Raw retention removes them with
-- the samples they were computed from (sql/maintenance/delete_raw.sql).
CREATE TABLE badput_marks (
    partition_start               TIMESTAMP NOT NULL,
    run_id                        VARCHAR   NOT NULL,
    minute                        TIMESTAMP NOT NULL,
    fingerprint                   VARCHAR   NOT NULL,
    PRIMARY KEY (partition_start, run_id, minute)
);
