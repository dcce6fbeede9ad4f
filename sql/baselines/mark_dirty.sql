-- Ingest wrote rows of `$source` with times in [$first, $last] (or replaced an hour whole): every
-- partition whose series read them is dirty from the first minute they reach. A minute's figures
-- read its own rows; its trailing baseline reads the `window_minutes` before it, so a write reaches
-- the partitions from $first's minute to $last + window_minutes. Runs inside the ingest's transaction.
UPDATE baseline_dirty
SET dirty_from = least(dirty_from, greatest(date_trunc('minute', $first::TIMESTAMP), partition_start))
WHERE source = $source
  AND partition_start + INTERVAL 1 HOUR > $first::TIMESTAMP
  AND partition_start <= $last::TIMESTAMP + to_minutes(window_minutes);
-- The live checks' windows (migration 180) from the same minute, when the table is one their series come from
-- (the GPU samples, the step records, the lineage events: not a prediction's outcome, which lands late by design):
-- every partition whose hour or lookback (at most three hours: the longest a windowed signal reads) holds the rows.
UPDATE check_windows
SET dirty_from = least(dirty_from, greatest(date_trunc('minute', $first::TIMESTAMP), partition_start))
WHERE $source IN ('gpu_samples', 'training_steps', 'lineage_events')
  AND partition_start + INTERVAL 1 HOUR > $first::TIMESTAMP
  AND partition_start <= $last::TIMESTAMP + INTERVAL 3 HOUR;
