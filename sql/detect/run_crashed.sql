-- Jobs that ended in [$start, $end) without finishing, in two ways:
-- 1. its launcher said so: a `run_ended` lineage event whose status is neither completed nor preempted
--    (a preemption is the scheduler's decision, not a fault);
-- 2. it died without a word (SIGKILL, the OOM killer, a node's crash): no `run_ended` since its latest
--    start, its ranks' steps stopped, and every one of its GPUs then reports (the exporter is alive)
--    held by no process of the run for $released_minutes minutes in a row, though they carried the
--    run before: its processes are gone. A hang holds its GPUs; a checkpoint pause resumes; a telemetry gap stops
--    the reports. A job that saved a checkpoint at its last step finished its work (a clean exit
--    that logged no end) and is left out.
-- With what the run did before (from `rank_minutes`, up to $lookback_minutes back): its last
-- completed step, its step interval, where its ranks ran, and whether its GPUs' memory filled to the
-- card's limit in the minutes before (a CUDA out-of-memory; from `gpu_samples`). `tick` is when the
-- end was known: the run_ended event, or the last of the $released_minutes minutes.
WITH ended AS (
    SELECT run_id, time AS ended_time, time AS tick,
           coalesce(json_extract_string(payload, '$.status'), 'unknown') AS status
    FROM lineage_events
    WHERE event = 'run_ended' AND time >= $start AND time < $end
), rank_last AS (   -- each rank's last logged step in the lookback, and its GPU
    SELECT run_id, rank, max(last_step_time) AS last_step_time, max(last_step) AS last_step,
           arg_max(host, minute) AS host, arg_max(gpu_index, minute) AS gpu_index
    FROM rank_minutes
    WHERE minute >= $start - to_minutes(CAST($lookback_minutes AS INTEGER)) AND minute < $end AND steps_completed > 0
    GROUP BY run_id, rank
), latest_start AS (
    SELECT run_id, max(time) AS started
    FROM lineage_events SEMI JOIN (SELECT DISTINCT run_id FROM rank_last) USING (run_id)
    WHERE event = 'run_started' AND time < $end
    GROUP BY run_id
), silent AS (   -- runs whose steps stopped and that logged no end since their latest start
    SELECT k.run_id, max(k.last_step_time) AS last_step_time, max(k.last_step) AS last_step,
           epoch(max(k.last_step_time) - min(k.last_step_time)) AS stop_spread_seconds, count(*) AS ranks
    FROM rank_last k LEFT JOIN latest_start s USING (run_id)
    WHERE NOT EXISTS (SELECT 1 FROM lineage_events e
                      WHERE e.run_id = k.run_id AND e.event = 'run_ended'
                        AND e.time >= coalesce(s.started, TIMESTAMP '-infinity') AND e.time < $end)
    GROUP BY k.run_id
    HAVING max(k.last_step_time) < $end - to_minutes(CAST($released_minutes AS INTEGER))
), after AS (   -- the run's GPUs, minute by minute after the minute of its last step
    SELECT q.run_id, g.minute, count(*) AS reporting, count(*) FILTER (WHERE g.run_id = q.run_id) AS held,
           max(g.memory_used_bytes) AS memory_used_bytes, max(g.utilization_ratio) AS utilization_ratio
    FROM silent q
    JOIN rank_last k USING (run_id)
    JOIN gpu_minutes g ON g.host = k.host AND g.gpu_index = k.gpu_index
        AND g.minute > time_bucket(INTERVAL 1 MINUTE, q.last_step_time) AND g.minute < $end
    GROUP BY q.run_id, g.minute
), carried AS (   -- the exporter attributed the run's GPUs to it before: a release can be seen
    SELECT q.run_id, count(DISTINCT g.host || ':' || g.gpu_index) AS gpus_carried
    FROM silent q
    JOIN gpu_minutes g ON g.run_id = q.run_id AND g.minute <= q.last_step_time
        AND g.minute >= q.last_step_time - to_minutes(CAST($released_minutes AS INTEGER) + 5)
    GROUP BY q.run_id
), blocked AS (   -- the last minute a GPU of the run was still held by it or did not report
    SELECT a.run_id, max(a.minute) FILTER (WHERE a.held > 0 OR a.reporting < q.ranks) AS last_blocked
    FROM after a JOIN silent q USING (run_id)
    GROUP BY a.run_id
), released AS (   -- the minutes since then: every GPU reporting, none held by the run
    SELECT a.run_id, min(a.minute) AS since, count(*) AS minutes,
           max(a.memory_used_bytes) AS memory_after_bytes, max(a.utilization_ratio) AS utilization_after
    FROM after a JOIN blocked b USING (run_id)
    WHERE a.minute > coalesce(b.last_blocked, TIMESTAMP '-infinity')
    GROUP BY a.run_id
    HAVING count(*) >= $released_minutes
), checkpointed AS (
    SELECT run_id, max(step) AS checkpoint_step
    FROM lineage_events SEMI JOIN silent USING (run_id)
    WHERE event = 'checkpoint_saved' AND time < $end
    GROUP BY run_id
), killed AS (
    SELECT q.run_id, r.since AS ended_time, r.since + to_minutes(CAST($released_minutes AS INTEGER)) AS tick,
           'no run_ended: every GPU released' AS status, r.memory_after_bytes, r.utilization_after,
           q.stop_spread_seconds, c.checkpoint_step
    FROM silent q
    JOIN released r USING (run_id)
    JOIN carried USING (run_id)
    LEFT JOIN checkpointed c USING (run_id)
    WHERE coalesce(c.checkpoint_step, -1) < q.last_step
), ends AS (
    SELECT run_id, ended_time, tick, status, NULL::BIGINT AS memory_after_bytes, NULL::DOUBLE AS utilization_after,
           NULL::DOUBLE AS stop_spread_seconds, NULL::BIGINT AS checkpoint_step
    FROM ended WHERE status NOT IN ('completed', 'preempted')
    UNION ALL
    SELECT * FROM killed WHERE tick > $start AND tick <= $end
), before AS (
    SELECT e.run_id, e.ended_time,
           max(r.last_step_time) AS last_step_time, max(r.last_step) AS last_step,
           median(r.step_seconds) AS step_interval_seconds, count(DISTINCT r.rank) AS ranks,
           list(DISTINCT r.host ORDER BY r.host) FILTER (WHERE r.host IS NOT NULL) AS hosts,
           list(DISTINCT r.host || ':' || r.gpu_index ORDER BY r.host || ':' || r.gpu_index)
               FILTER (WHERE r.host IS NOT NULL AND r.gpu_index IS NOT NULL) AS gpus
    FROM ends e
    JOIN rank_minutes r ON r.run_id = e.run_id AND r.minute <= e.ended_time
        AND r.minute >= e.ended_time - to_minutes(CAST($lookback_minutes AS INTEGER))
    GROUP BY e.run_id, e.ended_time
), memory AS (
    SELECT e.run_id, e.ended_time, max(g.memory_used_bytes / nullif(g.memory_total_bytes, 0)) AS memory_peak_ratio
    FROM ends e
    JOIN gpu_samples g ON g.run_id = e.run_id AND g.time >= e.ended_time - to_minutes(CAST($oom_minutes AS INTEGER))
        AND g.time <= e.ended_time
    GROUP BY e.run_id, e.ended_time
)
SELECT e.run_id, e.ended_time, e.tick, true AS in_window, e.status,
       b.last_step_time, b.last_step, b.step_interval_seconds, coalesce(b.ranks, 0) AS ranks,
       coalesce(b.hosts, []) AS hosts, coalesce(b.gpus, []) AS gpus, m.memory_peak_ratio,
       e.memory_after_bytes, e.utilization_after, e.stop_spread_seconds, e.checkpoint_step
FROM ends e
LEFT JOIN before b USING (run_id, ended_time)
LEFT JOIN memory m USING (run_id, ended_time)
ORDER BY e.run_id, e.ended_time;
