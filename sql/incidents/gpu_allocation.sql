-- The run a GPU was allocated to just before $at (a finding on it that names no run: after an XID 79
-- the GPU falls off the bus and its samples stop naming the run): the latest step record of a rank
-- on that host and GPU, or GPU sample naming a run, within $within_minutes before $at.
SELECT run_id
FROM (
    SELECT run_id, time FROM training_steps
    WHERE host = $host AND gpu_index = $gpu AND run_id IS NOT NULL
      AND time <= $at AND time >= $at - to_minutes(CAST($within_minutes AS INTEGER))
    UNION ALL
    SELECT run_id, time FROM gpu_samples
    WHERE host = $host AND gpu_index = $gpu AND run_id IS NOT NULL
      AND time <= $at AND time >= $at - to_minutes(CAST($within_minutes AS INTEGER))
)
ORDER BY time DESC, run_id
LIMIT 1;
