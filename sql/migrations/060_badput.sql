-- Badput accounting (assets/badput.py, docs/analysts.md "Where the GPU-hours go"): what a step's
-- model FLOPs are, and one row per run and minute splitting the GPU-seconds the run held into
-- categories that sum to them exactly.

-- Model FLOPs a step record may carry (all optional): the model's parameter count (the 6N rule:
-- 6 FLOPs per parameter per token, forward and backward), or its model FLOPs per token when the
-- trainer knows them (attention included), or the achieved TFLOP/s per GPU a framework printed
-- (Megatron's "throughput per GPU (TFLOP/s/GPU)", DeepSpeed's "TFLOPs").
ALTER TABLE training_steps ADD COLUMN parameters BIGINT;
ALTER TABLE training_steps ADD COLUMN model_flops_per_token DOUBLE;
ALTER TABLE training_steps ADD COLUMN tflops DOUBLE;

CREATE TABLE badput_minutes (
    run_id                        VARCHAR   NOT NULL,
    minute                        TIMESTAMP NOT NULL,
    attempt                       INTEGER   NOT NULL,   -- 0 for the first run_started, 1 after one restart, ...
    gpus                          INTEGER   NOT NULL,   -- GPUs holding the run's id in the minute
    allocated_gpu_seconds         DOUBLE    NOT NULL,   -- = the sum of the ten categories below
    productive_gpu_seconds        DOUBLE    NOT NULL,
    startup_gpu_seconds           DOUBLE    NOT NULL,
    checkpoint_save_gpu_seconds   DOUBLE    NOT NULL,
    data_stall_gpu_seconds        DOUBLE    NOT NULL,
    evaluation_gpu_seconds        DOUBLE    NOT NULL,
    hang_gpu_seconds              DOUBLE    NOT NULL,
    idle_gpu_seconds              DOUBLE    NOT NULL,
    slow_steps_gpu_seconds        DOUBLE    NOT NULL,
    wasted_progress_gpu_seconds   DOUBLE    NOT NULL,
    unexplained_gpu_seconds       DOUBLE    NOT NULL,
    steps_completed               INTEGER   NOT NULL,
    ideal_step_seconds            DOUBLE,               -- the run's own baseline step (data wait included)
    gpu_name                      VARCHAR,
    precision                     VARCHAR,
    peak_flops_per_gpu            DOUBLE,               -- dense peak of gpu_name at precision (peak_flops.yaml)
    model_flops_per_second        DOUBLE,               -- per GPU, from tokens x (FLOPs per token or 6N)
    reported_flops_per_second     DOUBLE,               -- per GPU, from the TFLOP/s the framework printed
    mfu                           DOUBLE,               -- model FLOPs utilization (model, else reported)
    mfu_from_model_flops          DOUBLE,
    mfu_from_reported_tflops      DOUBLE
);
