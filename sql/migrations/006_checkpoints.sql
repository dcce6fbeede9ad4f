-- Checkpoint audits (issue 5): the sha256 cache, one audit row per checkpoint and partition, the
-- problems each audit found, and each run's restart point as of the partition.

-- sha256 of a file as it was at (size, mtime_ns): a second audit of an unchanged file hashes nothing.
CREATE TABLE checkpoint_hashes (
    path                          VARCHAR   PRIMARY KEY,
    size_bytes                    BIGINT    NOT NULL,
    mtime_ns                      BIGINT    NOT NULL,
    sha256                        VARCHAR   NOT NULL,
    hashed_at                     TIMESTAMP NOT NULL
);

-- One row per checkpoint the partition audited: those saved in its hour (is_new) and the ones it
-- re-checked (each run's newest before the hour, and any a model version was registered from).
-- status: ok | failed | not_audited (recorded outside every configured root: never read).
CREATE TABLE checkpoint_audits (
    partition_start               TIMESTAMP NOT NULL,
    checkpoint                    VARCHAR   NOT NULL,   -- "<run>/<name>", else the path under its root
    path                          VARCHAR   NOT NULL,   -- where it was read (absolute)
    recorded_path                 VARCHAR,              -- as lineage recorded it
    root                          VARCHAR,
    run_id                        VARCHAR,
    step                          BIGINT,
    format                        VARCHAR   NOT NULL,
    saved_at                      TIMESTAMP NOT NULL,   -- lineage time, else the newest file's mtime
    tick                          TIMESTAMP,            -- data time the audit stands for
    is_new                        BOOLEAN   NOT NULL,
    source                        VARCHAR   NOT NULL,   -- lineage | disk | both
    status                        VARCHAR   NOT NULL,
    files                         INTEGER   NOT NULL,
    bytes                         BIGINT    NOT NULL,
    recorded_bytes                BIGINT,
    files_hashed                  INTEGER   NOT NULL,
    bytes_hashed                  BIGINT    NOT NULL,
    problems                      INTEGER   NOT NULL,
    model_versions                VARCHAR,              -- registered from it before the partition's end
    audited_at                    TIMESTAMP NOT NULL    -- wall clock of the audit
);

CREATE TABLE checkpoint_problems (
    partition_start               TIMESTAMP NOT NULL,
    checkpoint                    VARCHAR   NOT NULL,
    kind                          VARCHAR   NOT NULL,
    file                          VARCHAR,
    detail                        VARCHAR   NOT NULL
);

-- Per run with a checkpoint audited in the partition: the newest checkpoint whose latest audit
-- passed, and what a restart from it would lose as of the partition's data time.
CREATE TABLE checkpoint_restart_points (
    partition_start               TIMESTAMP NOT NULL,
    run_id                        VARCHAR   NOT NULL,
    last_good_checkpoint          VARCHAR,
    last_good_step                BIGINT,
    last_good_saved_at            TIMESTAMP,
    last_step                     BIGINT,
    last_step_at                  TIMESTAMP,
    steps_since_last_good         BIGINT,
    gpus                          INTEGER,
    restart_cost_gpu_hours        DOUBLE
);
