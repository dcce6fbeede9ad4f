-- Retention of the raw rows (`retention.raw_days`): per-sample and per-step records, the quarantine
-- and the read offsets of hours before $raw_before. The ingest log (`ingest_files`) is kept: it is
-- small, and the raw-zone sensor's daily scan compares the raw zone with it.
DELETE FROM gpu_samples WHERE time < $raw_before;
DELETE FROM training_steps WHERE time < $raw_before;
DELETE FROM step_ends WHERE minute < $raw_before;        -- derived from the step records, kept as long
DELETE FROM serving_metrics WHERE time < $raw_before;
DELETE FROM predictions WHERE time < $raw_before;
DELETE FROM prediction_outcomes WHERE time < $raw_before;
DELETE FROM quarantine WHERE partition_start < $raw_before;
DELETE FROM ingest_offsets WHERE partition_start < $raw_before;
DELETE FROM baseline_dirty WHERE partition_start < $raw_before;
DELETE FROM badput_marks WHERE partition_start < $raw_before;     -- what badput computed them from (migration 170)
DELETE FROM check_windows WHERE partition_start < $raw_before;    -- how far the live checks' windows reach (migration 180)
