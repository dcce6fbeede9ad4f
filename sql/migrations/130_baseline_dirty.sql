-- Incremental baselines (issue 15): per input table (`source`: training_steps, gpu_samples) and
-- hourly partition whose per-minute series have been computed, the first minute they may no longer
-- match their inputs. Ingest lowers `dirty_from` for every partition a write can reach (its own
-- minutes, and the following minutes whose trailing `window_minutes` baseline reads them); a live
-- detect run recomputes the partition from there and sets it back to NULL (clean). No row: the
-- partition is computed whole.
CREATE TABLE baseline_dirty (
    source                        VARCHAR   NOT NULL,
    partition_start               TIMESTAMP NOT NULL,
    dirty_from                    TIMESTAMP,
    window_minutes                INTEGER   NOT NULL,
    PRIMARY KEY (source, partition_start)
);
