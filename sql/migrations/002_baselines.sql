-- Rolling baselines: per-minute time series per run, per rank and per GPU, each row carrying the
-- trailing-window robust statistics (median, MAD) that detectors compare against and analysts read.
-- Also the raw fields the training and GPU signals need beyond the skeleton's.

ALTER TABLE training_steps ADD COLUMN nan_iterations_total BIGINT;     -- Megatron "number of nan iterations", cumulative
ALTER TABLE training_steps ADD COLUMN skipped_iterations_total BIGINT; -- fp16 overflow skips, cumulative
ALTER TABLE gpu_samples ADD COLUMN remapped_rows_correctable_total BIGINT;
ALTER TABLE gpu_samples ADD COLUMN remapped_rows_uncorrectable_total BIGINT;
ALTER TABLE gpu_samples ADD COLUMN row_remap_pending BOOLEAN;
ALTER TABLE gpu_samples ADD COLUMN row_remap_failure BOOLEAN;

-- One row per run per minute (UTC minute start). Values are over the ranks' records in that minute;
-- *_baseline / *_mad are the median and MAD of the minute values over the trailing
-- baseline_window_minutes (the current minute excluded); baseline_minutes counts the minutes in it.
CREATE TABLE run_minutes (
    run_id                          VARCHAR   NOT NULL,
    minute                          TIMESTAMP NOT NULL,
    world_size                      INTEGER,
    ranks_reporting                 INTEGER   NOT NULL,
    steps_completed                 INTEGER   NOT NULL,   -- distinct steps completed by any rank
    last_step                       BIGINT,
    last_step_time                  TIMESTAMP,
    loss                            DOUBLE,               -- median of finite rank losses
    loss_min                        DOUBLE,
    loss_max                        DOUBLE,
    nonfinite_losses                INTEGER   NOT NULL,   -- records with NaN/Inf loss
    nan_iterations_total            BIGINT,
    skipped_iterations_total        BIGINT,
    grad_norm                       DOUBLE,
    grad_norm_max                   DOUBLE,
    loss_scale                      DOUBLE,               -- min over ranks
    learning_rate                   DOUBLE,
    tokens_per_second               DOUBLE,
    step_seconds                    DOUBLE,               -- median over records
    step_seconds_max                DOUBLE,
    data_seconds                    DOUBLE,
    compute_seconds                 DOUBLE,
    collective_seconds              DOUBLE,
    memory_allocated_bytes          BIGINT,               -- max over ranks
    memory_reserved_bytes           BIGINT,
    memory_inactive_split_bytes     BIGINT,
    alloc_retries_total             BIGINT,
    ooms_total                      BIGINT,
    step_seconds_baseline           DOUBLE,
    step_seconds_mad                DOUBLE,
    tokens_per_second_baseline      DOUBLE,
    tokens_per_second_mad           DOUBLE,
    loss_baseline                   DOUBLE,
    loss_mad                        DOUBLE,
    grad_norm_baseline              DOUBLE,
    grad_norm_mad                   DOUBLE,
    collective_seconds_baseline     DOUBLE,
    collective_seconds_mad          DOUBLE,
    baseline_window_minutes         INTEGER   NOT NULL,
    baseline_minutes                INTEGER   NOT NULL
);

-- One row per run, rank and minute, with the same minute's median over the run's ranks (peer_*)
-- and the rank's own trailing baseline.
CREATE TABLE rank_minutes (
    run_id                          VARCHAR   NOT NULL,
    rank                            INTEGER   NOT NULL,
    host                            VARCHAR,
    gpu_index                       INTEGER,
    minute                          TIMESTAMP NOT NULL,
    steps_completed                 INTEGER   NOT NULL,
    last_step                       BIGINT,
    last_step_time                  TIMESTAMP,
    loss                            DOUBLE,
    nonfinite_losses                INTEGER   NOT NULL,
    grad_norm                       DOUBLE,
    step_seconds                    DOUBLE,
    data_seconds                    DOUBLE,
    compute_seconds                 DOUBLE,
    collective_seconds              DOUBLE,
    memory_allocated_bytes          BIGINT,
    memory_reserved_bytes           BIGINT,
    memory_inactive_split_bytes     BIGINT,
    alloc_retries_total             BIGINT,
    ooms_total                      BIGINT,
    peer_compute_seconds            DOUBLE,
    peer_collective_seconds         DOUBLE,
    peer_grad_norm                  DOUBLE,
    peer_ranks                      INTEGER,
    compute_seconds_baseline        DOUBLE,
    compute_seconds_mad             DOUBLE,
    grad_norm_ratio_baseline        DOUBLE,   -- median of grad_norm / peer_grad_norm over the window
    baseline_window_minutes         INTEGER   NOT NULL,
    baseline_minutes                INTEGER   NOT NULL
);

-- One row per GPU per minute.
CREATE TABLE gpu_minutes (
    host                            VARCHAR   NOT NULL,
    gpu_index                       INTEGER   NOT NULL,
    gpu_uuid                        VARCHAR,
    minute                          TIMESTAMP NOT NULL,
    run_id                          VARCHAR,              -- the run holding the GPU most of the minute
    samples                         INTEGER   NOT NULL,
    utilization_ratio               DOUBLE,
    power_watts                     DOUBLE,
    power_limit_watts               DOUBLE,
    temperature_celsius             DOUBLE,               -- max
    sm_clock_hertz                  DOUBLE,               -- median
    throttle_reasons                BIGINT,               -- bitwise OR over the minute
    memory_used_bytes               BIGINT,
    sm_active_ratio                 DOUBLE,
    tensor_active_ratio             DOUBLE,
    ecc_corrected_errors_total      BIGINT,               -- max (counters)
    ecc_uncorrected_errors_total    BIGINT,
    xid_errors_total                BIGINT,
    last_xid                        INTEGER,
    remapped_rows_uncorrectable_total BIGINT,
    row_remap_pending               BOOLEAN,
    row_remap_failure               BOOLEAN,
    sm_clock_baseline               DOUBLE,               -- the GPU's own trailing median while held by a run
    power_watts_baseline            DOUBLE,
    baseline_window_minutes         INTEGER   NOT NULL,
    baseline_minutes                INTEGER   NOT NULL
);
