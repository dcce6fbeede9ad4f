-- Allocator health per run per minute, from `rank_minutes`, for every run with records in
-- [$start, $end) plus $lookback_minutes of history (rows with `in_window` false: trailing windows only).
-- gap_bytes: the worst rank's reserved minus allocated bytes (memory the caching allocator holds
-- but cannot use); worst_rank: that rank; inactive_split_bytes: the largest over ranks;
-- alloc_retries_total / ooms_total: the highest rank's cumulative counter (a max
-- stays monotone when a rank misses a minute; a sum would not); memory_reserved_bytes
-- and memory_total_bytes: of the rank whose reservation fills its GPU the most (OOM headroom).
WITH runs AS (
    SELECT DISTINCT run_id FROM rank_minutes WHERE minute >= $start AND minute < $end
), gpu_memory AS (   -- each GPU's memory size, as its samples in the partition report it
    SELECT host, gpu_index, max(memory_total_bytes) AS memory_total_bytes
    FROM gpu_samples
    WHERE time >= $start AND time < $end
    GROUP BY ALL
), ranks AS (
    SELECT r.run_id, r.minute, r.rank, r.host, r.gpu_index,
           r.memory_reserved_bytes - r.memory_allocated_bytes AS gap_bytes,
           r.memory_reserved_bytes, r.memory_inactive_split_bytes, r.alloc_retries_total, r.ooms_total,
           g.memory_total_bytes,
           r.memory_reserved_bytes / nullif(g.memory_total_bytes, 0) AS reserved_ratio
    FROM rank_minutes r SEMI JOIN runs USING (run_id)
    LEFT JOIN gpu_memory g USING (host, gpu_index)
    WHERE r.minute >= $start - to_seconds(60 * $lookback_minutes) AND r.minute < $end
), first_seen AS (   -- when each run first reported: its allocator warms up in the first minutes
    SELECT run_id, first_minute FROM run_starts SEMI JOIN runs USING (run_id)
), placement AS (
    SELECT run_id,
           list(DISTINCT host ORDER BY host) FILTER (WHERE host IS NOT NULL AND minute >= $start) AS hosts,
           list(DISTINCT host || ':' || gpu_index ORDER BY host || ':' || gpu_index)
               FILTER (WHERE host IS NOT NULL AND gpu_index IS NOT NULL AND minute >= $start) AS gpus
    FROM ranks
    GROUP BY run_id
), per_minute AS (
    SELECT run_id, minute,
           minute + INTERVAL 1 MINUTE AS tick, minute >= $start AS in_window,
           max(gap_bytes) AS gap_bytes,
           arg_max(rank, gap_bytes) AS worst_rank,
           max(memory_inactive_split_bytes) AS inactive_split_bytes,
           max(alloc_retries_total) AS alloc_retries_total,
           max(ooms_total) AS ooms_total,
           arg_max(memory_reserved_bytes, coalesce(reserved_ratio, 0)) AS memory_reserved_bytes,
           arg_max(memory_total_bytes, coalesce(reserved_ratio, 0)) AS memory_total_bytes,
           count(*) AS ranks_reporting
    FROM ranks
    GROUP BY run_id, minute
)
-- placement lists are joined after the per-minute aggregation: one list per row, not per rank
SELECT m.*, s.first_minute, coalesce(p.hosts, []) AS hosts, coalesce(p.gpus, []) AS gpus
FROM per_minute m
LEFT JOIN placement p USING (run_id)
LEFT JOIN first_seen s USING (run_id)
ORDER BY m.run_id, m.minute;
