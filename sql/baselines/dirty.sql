-- What a partition's series need recomputing: its row in `baseline_dirty` (none: all of it).
SELECT dirty_from, window_minutes FROM baseline_dirty WHERE source = $source AND partition_start = $start;
