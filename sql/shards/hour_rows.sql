-- The hour's gpu_minutes rows, every shard's.
SELECT count(*) FROM gpu_minutes WHERE minute >= $start AND minute < $end;
