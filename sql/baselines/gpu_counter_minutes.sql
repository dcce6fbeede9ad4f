-- Replace [$from, $end) of gpu_counter_minutes: per GPU and minute, each hardware counter's first and last
-- reading and its rises within the minute (the table and its macro: sql/migrations/160_gpu_counter_minutes.sql).
-- A minute's rows read only that minute's samples, so no lookback is read. The shard markers are empty, or
-- for a shard's partition its hosts' rows only (assets/baselines.py replace_shard_series).
DELETE FROM gpu_counter_minutes WHERE minute >= $from AND minute < $end /*@shard*/;
INSERT INTO gpu_counter_minutes BY NAME
SELECT * FROM gpu_counter_parts($from, $end) WHERE true /*@shard*/;
SELECT count(*) FROM gpu_counter_minutes WHERE minute >= $start AND minute < $end /*@shard*/;
