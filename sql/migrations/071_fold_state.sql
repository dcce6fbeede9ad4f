-- Incremental incident fold (issue 15): per (signal, incident entity) group, what the last fold
-- saw (a digest of its findings and how many) and what it made of them (its incidents before
-- correlation and triage, and their transitions, serialized by assets/incidents_incremental.py),
-- with each incident's last_seen and resolved flag (resolution is the one part that depends on
-- the signal's evaluations). `config` is a digest of the fold's settings and code: another one
-- refolds the group. `goodput refold` clears the table and folds everything.
CREATE TABLE fold_state (
    signal                        VARCHAR   NOT NULL,
    entity_type                   VARCHAR   NOT NULL,
    entity_id                     VARCHAR   NOT NULL,
    digest                        UBIGINT   NOT NULL,
    findings                      BIGINT    NOT NULL,
    resolution                    VARCHAR   NOT NULL,
    config                        VARCHAR   NOT NULL,
    folded                        BLOB      NOT NULL,
    PRIMARY KEY (signal, entity_type, entity_id)
);
