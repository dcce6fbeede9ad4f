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
-- and count of its findings (kind 'f') and of its clearings (kind 'c'), and the first and last time
-- among them (detected_at; cleared_at). A partition written again with the same rows digests the
-- same and refolds nothing; a changed one refolds the groups it touches, from the first episode its
-- earliest changed row can reach.
CREATE TABLE fold_seen (
    signal                        VARCHAR   NOT NULL,
    partition_start               TIMESTAMP NOT NULL,
    entity_type                   VARCHAR   NOT NULL,
    entity_id                     VARCHAR   NOT NULL,
    kind                          VARCHAR   NOT NULL,
    digest                        UBIGINT   NOT NULL,
    n                             BIGINT    NOT NULL,
    first_at                      TIMESTAMP,
    last_at                       TIMESTAMP
);

-- The evaluation marks as the fold last saw them (a change near an incident's clean window rechecks it).
CREATE TABLE fold_evaluations (
    signal                        VARCHAR   NOT NULL,
    partition_start               TIMESTAMP NOT NULL,
    evaluated_until               TIMESTAMP
);

-- Per incident, what correlation and triage read of it, before triage (triage rewrites run_id),
-- with its group and place in the group (pos), its correlation id, a digest of its row and
-- transitions, what a refold from a later episode needs of it (episode, members, when it was
-- first and last detected, the clearing it took), and its row and transitions before correlation
-- and triage (`folded`, pickled). The fold finds the incidents a change can reach here without
-- reading every incident, and refolds a group from the first episode a change can reach.
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
    digest                        VARCHAR   NOT NULL,
    episode                       INTEGER   NOT NULL,
    members                       VARCHAR[],
    opened                        TIMESTAMP NOT NULL,
    last_detected                 TIMESTAMP NOT NULL,
    cleared_at                    TIMESTAMP,
    folded                        BLOB      NOT NULL
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

-- Each group's incidents are in fold_incidents now, one row each (a refold from a later episode
-- keeps the earlier ones without reading them whole). Dropped: an existing home folds once in full.
DROP TABLE fold_state;
