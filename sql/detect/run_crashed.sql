-- Jobs that ended in [$start, $end) without finishing: a `run_ended` lineage event whose status is
-- neither completed nor preempted (a preemption is the scheduler's decision, not a fault), with
-- what the run did before it (from `rank_minutes`, up to $lookback_minutes back): its last
-- completed step, its step interval, where its ranks ran, and whether its GPUs' memory filled to the
-- card's limit in the minutes before (a CUDA out-of-memory; from `gpu_samples`).
WITH ended AS (
    SELECT run_id, time AS ended_time,
           coalesce(json_extract_string(payload, '$.status'), 'unknown') AS status
    FROM lineage_events
    WHERE event = 'run_ended' AND time >= $start AND time < $end
), before AS (
    SELECT e.run_id, e.ended_time,
           max(r.last_step_time) AS last_step_time, max(r.last_step) AS last_step,
           median(r.step_seconds) AS step_interval_seconds, count(DISTINCT r.rank) AS ranks,
           list(DISTINCT r.host ORDER BY r.host) FILTER (WHERE r.host IS NOT NULL) AS hosts,
           list(DISTINCT r.host || ':' || r.gpu_index ORDER BY r.host || ':' || r.gpu_index)
               FILTER (WHERE r.host IS NOT NULL AND r.gpu_index IS NOT NULL) AS gpus
    FROM ended e
    JOIN rank_minutes r ON r.run_id = e.run_id AND r.minute <= e.ended_time
        AND r.minute >= e.ended_time - to_minutes(CAST($lookback_minutes AS INTEGER))
    GROUP BY e.run_id, e.ended_time
), memory AS (
    SELECT e.run_id, e.ended_time, max(g.memory_used_bytes / nullif(g.memory_total_bytes, 0)) AS memory_peak_ratio
    FROM ended e
    JOIN gpu_samples g ON g.run_id = e.run_id AND g.time >= e.ended_time - to_minutes(CAST($oom_minutes AS INTEGER))
        AND g.time <= e.ended_time
    GROUP BY e.run_id, e.ended_time
)
SELECT e.run_id, e.ended_time, e.ended_time AS tick, true AS in_window, e.status,
       b.last_step_time, b.last_step, b.step_interval_seconds, coalesce(b.ranks, 0) AS ranks,
       coalesce(b.hosts, []) AS hosts, coalesce(b.gpus, []) AS gpus, m.memory_peak_ratio
FROM ended e
LEFT JOIN before b USING (run_id, ended_time)
LEFT JOIN memory m USING (run_id, ended_time)
WHERE e.status NOT IN ('completed', 'preempted')
ORDER BY e.run_id, e.ended_time;
