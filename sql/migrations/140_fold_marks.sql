-- A flat incident fold (issue 15): what changed since the last fold, and what the fold needs to
-- update only that. assets/incidents_incremental.py reads and writes all of these.
--
-- fold_marks: every (signal, partition) a check wrote (sql/detect/store_findings.sql, in the same
-- transaction as its findings, clearings and evaluation mark) or retention deleted from, since the
-- last fold; the fold reads and deletes them in its own transaction.
CREATE TABLE fold_marks (
    signal                        VARCHAR   NOT NULL,
    partition_start               TIMESTAMP NOT NULL
);

-- What the fold last saw of each marked partition: per (signal, partition, incident group) a digest
-- and count of its findings (kind 'f') and of its clearings (kind 'c'). A partition written again
-- with the same rows digests the same and refolds nothing; a changed one refolds the groups it touches.
CREATE TABLE fold_seen (
    signal                        VARCHAR   NOT NULL,
    partition_start               TIMESTAMP NOT NULL,
    entity_type                   VARCHAR   NOT NULL,
    entity_id                     VARCHAR   NOT NULL,
    kind                          VARCHAR   NOT NULL,
    digest                        UBIGINT   NOT NULL,
    n                             BIGINT    NOT NULL
);

-- The evaluation marks as the fold last saw them (a change near an incident's clean window rechecks it).
CREATE TABLE fold_evaluations (
    signal                        VARCHAR   NOT NULL,
    partition_start               TIMESTAMP NOT NULL,
    evaluated_until               TIMESTAMP
);

-- Per incident, what correlation and triage read of it, before triage (triage rewrites run_id),
-- with its group, its place in the group, its correlation id and a digest: the fold finds the
-- incidents a change can reach here without reading every incident.
CREATE TABLE fold_incidents (
    incident_id                   VARCHAR   NOT NULL,
    signal                        VARCHAR   NOT NULL,
    entity_type                   VARCHAR   NOT NULL,
    entity_id                     VARCHAR   NOT NULL,
    pos                           INTEGER   NOT NULL,
    family                        VARCHAR   NOT NULL,
    onset                         TIMESTAMP NOT NULL,
    last_seen                     TIMESTAMP NOT NULL,
    run_id                        VARCHAR,
    hosts                         VARCHAR[],
    gpus                          VARCHAR[],
    endpoint                      VARCHAR,
    model_version                 VARCHAR,
    correlation_id                VARCHAR,
    digest                        VARCHAR   NOT NULL   -- of its row and transitions before triage: did a refold change it?
);

-- The checkpoint lineage a finding's checkpoint comes from (sql/incidents/findings.sql), and the
-- serving versions triage reads, as the fold last saw them: a change refolds what it reaches.
CREATE TABLE fold_checkpoints (
    run_id                        VARCHAR,
    time                          TIMESTAMP,
    checkpoint_path               VARCHAR,
    step                          BIGINT,
    status                        VARCHAR
);
CREATE TABLE fold_versions (
    endpoint                      VARCHAR,
    model_version                 VARCHAR,
    digest                        UBIGINT   NOT NULL
);

-- The settings and code digest the state was folded with, and the evaluation horizon it saw.
CREATE TABLE fold_meta (
    config                        VARCHAR   NOT NULL,
    horizon                       TIMESTAMP
);

-- Each group's incidents and transitions before correlation and triage, as before, without the
-- digests (fold_seen has them per partition). Dropped: an existing home folds once in full.
DROP TABLE fold_state;
CREATE TABLE fold_state (
    signal                        VARCHAR   NOT NULL,
    entity_type                   VARCHAR   NOT NULL,
    entity_id                     VARCHAR   NOT NULL,
    folded                        BLOB      NOT NULL
);
