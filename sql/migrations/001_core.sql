-- The core warehouse: ingest tables (one per raw source), quarantine, the ingest log,
-- findings and incidents. Timestamps are UTC, stored as TIMESTAMP.

CREATE TABLE gpu_samples (
    time                          TIMESTAMP NOT NULL,
    host                          VARCHAR   NOT NULL,
    gpu_index                     INTEGER   NOT NULL,
    gpu_uuid                      VARCHAR,
    gpu_name                      VARCHAR,
    run_id                        VARCHAR,
    utilization_ratio             DOUBLE,
    memory_used_bytes             BIGINT,
    memory_total_bytes            BIGINT,
    power_watts                   DOUBLE,
    power_limit_watts             DOUBLE,
    temperature_celsius           DOUBLE,
    sm_clock_hertz                DOUBLE,
    throttle_reasons              BIGINT,
    ecc_corrected_errors_total    BIGINT,
    ecc_uncorrected_errors_total  BIGINT,
    xid_errors_total              BIGINT,
    last_xid                      INTEGER,
    sm_active_ratio               DOUBLE,
    tensor_active_ratio           DOUBLE,
    source_file                   VARCHAR   NOT NULL,
    source_line                   INTEGER   NOT NULL
);

CREATE TABLE training_steps (
    time                          TIMESTAMP NOT NULL,
    run_id                        VARCHAR   NOT NULL,
    rank                          INTEGER   NOT NULL,
    world_size                    INTEGER,
    host                          VARCHAR,
    gpu_index                     INTEGER,
    step                          BIGINT    NOT NULL,
    loss                          DOUBLE,
    grad_norm                     DOUBLE,
    learning_rate                 DOUBLE,
    loss_scale                    DOUBLE,
    tokens                        BIGINT,
    step_seconds                  DOUBLE,
    data_seconds                  DOUBLE,
    compute_seconds               DOUBLE,
    collective_seconds            DOUBLE,
    memory_allocated_bytes        BIGINT,
    memory_reserved_bytes         BIGINT,
    memory_inactive_split_bytes   BIGINT,
    alloc_retries_total           BIGINT,
    ooms_total                    BIGINT,
    source_file                   VARCHAR   NOT NULL,
    source_line                   INTEGER   NOT NULL
);

-- Lineage events keep their whole record in `payload`; the columns are the ones joins need.
CREATE TABLE lineage_events (
    time                          TIMESTAMP NOT NULL,
    event                         VARCHAR   NOT NULL,
    run_id                        VARCHAR,
    step                          BIGINT,
    checkpoint_path               VARCHAR,
    model_version                 VARCHAR,
    endpoint                      VARCHAR,
    payload                       JSON      NOT NULL,
    source_file                   VARCHAR   NOT NULL,
    source_line                   INTEGER   NOT NULL
);

CREATE TABLE quarantine (
    source                        VARCHAR   NOT NULL,
    partition_start               TIMESTAMP NOT NULL,
    file                          VARCHAR   NOT NULL,
    line                          INTEGER   NOT NULL,
    raw                           VARCHAR   NOT NULL,
    reason                        VARCHAR   NOT NULL
);

-- What each partition run read: one row per raw file, so late or changed files can be found.
CREATE TABLE ingest_files (
    source                        VARCHAR   NOT NULL,
    partition_start               TIMESTAMP NOT NULL,
    file                          VARCHAR   NOT NULL,
    size_bytes                    BIGINT    NOT NULL,
    modified_ns                   BIGINT    NOT NULL,
    rows_loaded                   BIGINT    NOT NULL,
    rows_quarantined              BIGINT    NOT NULL
);

-- One row per contiguous stretch a detector flagged inside one evaluated partition.
CREATE TABLE findings (
    signal                        VARCHAR   NOT NULL,
    entity_type                   VARCHAR   NOT NULL,
    entity_id                     VARCHAR   NOT NULL,
    partition_start               TIMESTAMP NOT NULL,
    onset                         TIMESTAMP NOT NULL,
    detected_at                   TIMESTAMP NOT NULL,
    last_seen                     TIMESTAMP NOT NULL,
    run_id                        VARCHAR,
    rank                          INTEGER,
    hosts                         VARCHAR[],
    gpus                          VARCHAR[],
    value                         DOUBLE,
    baseline                      DOUBLE,
    threshold                     DOUBLE,
    evidence                      JSON
);

-- How far each signal has been evaluated, per partition: "clean since" needs to know it looked.
CREATE TABLE evaluations (
    signal                        VARCHAR   NOT NULL,
    partition_start               TIMESTAMP NOT NULL,
    evaluated_until               TIMESTAMP,
    entities                      INTEGER   NOT NULL,
    flagged                       INTEGER   NOT NULL
);

CREATE TABLE incidents (
    incident_id                   VARCHAR   PRIMARY KEY,
    signal                        VARCHAR   NOT NULL,
    family                        VARCHAR   NOT NULL,
    tier                          VARCHAR   NOT NULL,
    status                        VARCHAR   NOT NULL,
    title                         VARCHAR   NOT NULL,
    onset                         TIMESTAMP NOT NULL,
    opened                        TIMESTAMP NOT NULL,
    last_seen                     TIMESTAMP NOT NULL,
    resolved                      TIMESTAMP,
    entity_type                   VARCHAR   NOT NULL,
    entity_id                     VARCHAR   NOT NULL,
    run_id                        VARCHAR,
    rank                          INTEGER,
    hosts                         VARCHAR[],
    gpus                          VARCHAR[],
    endpoint                      VARCHAR,
    model_version                 VARCHAR,
    checkpoint                    VARCHAR,
    owner                         VARCHAR   NOT NULL,
    playbook                      VARCHAR   NOT NULL,
    evidence                      JSON,
    gpu_hours_at_risk             DOUBLE,
    triage_class                  VARCHAR,
    correlation_id                VARCHAR,
    findings                      INTEGER   NOT NULL
);
