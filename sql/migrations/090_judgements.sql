-- Judged or not (issue 17): per evaluation (signal x hourly partition), every entity present in
-- the window, how many minutes it was present, how many of those the signal could judge (it had
-- every field and the history its detector compares), and why it could judge none (null when it
-- judged some). Silence from a detector that could not look is "not judged", never "healthy".
CREATE TABLE judgements (
    signal                        VARCHAR   NOT NULL,
    partition_start               TIMESTAMP NOT NULL,
    entity_type                   VARCHAR   NOT NULL,
    entity_id                     VARCHAR   NOT NULL,
    minutes                       INTEGER   NOT NULL,   -- minutes present in the partition's window
    judged_minutes                INTEGER   NOT NULL,   -- of those, minutes with the fields and history needed
    judged                        BOOLEAN   NOT NULL,   -- judged_minutes > 0
    reason                        VARCHAR               -- why not: "too little history (...)", "missing field <column>"
);
-- No secondary index: every evaluation deletes and re-inserts its rows, zone maps already prune by
-- partition, and a non-unique ART index replayed from the WAL of a killed run failed the next run's
-- DELETE ("Failed to delete all rows from index", tests/fault_injection/test_sigkill.py).
