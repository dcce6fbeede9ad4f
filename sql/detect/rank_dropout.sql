-- Per rank and minute in which its run holds GPUs or any of its ranks reported, from
-- $lookback_minutes before the partition to $end (`in_window` marks the partition's minutes):
-- when the rank and the run last completed a step, the run's step interval, whether the rank's
-- GPU is still held by the run (and how many GPUs the run holds), and the GPU's last XID.
-- A rank silent for longer than the lookback is still one of its run's ranks, with its true last
-- step: the run's ranks and their last steps before the lookback come from its history since its
-- latest (re)start (a restart may change the world size), read back only as far as a silent rank needs.
WITH rm AS (
    SELECT run_id, rank, host, gpu_index, minute, last_step_time, step_seconds
    FROM rank_minutes
    WHERE minute >= $start - to_minutes(CAST($lookback_minutes AS INTEGER)) AND minute < $end
), gm AS (
    SELECT host, gpu_index, minute, run_id, samples, utilization_ratio, last_xid
    FROM gpu_minutes
    WHERE minute >= $start - to_minutes(CAST($lookback_minutes AS INTEGER)) AND minute < $end
), runs_now AS (
    SELECT DISTINCT run_id FROM gm WHERE run_id IS NOT NULL
    UNION
    SELECT DISTINCT run_id FROM rm
), started AS (
    SELECT run_id, max(time) AS started
    FROM lineage_events SEMI JOIN runs_now USING (run_id)
    WHERE event = 'run_started' AND time < $end
    GROUP BY run_id
), near AS (     -- the run's rank minutes since its (re)start, from the hour before the lookback on ...
    SELECT r.run_id, r.rank, r.minute, r.host, r.gpu_index, r.last_step_time
    FROM rank_minutes r SEMI JOIN runs_now USING (run_id)
    LEFT JOIN started s ON s.run_id = r.run_id
    WHERE r.minute >= $start - to_minutes(CAST($lookback_minutes AS INTEGER)) - INTERVAL 1 HOUR AND r.minute < $end
      AND r.minute >= coalesce(s.started, TIMESTAMP '-infinity') - INTERVAL 1 MINUTE
), whole AS (    -- ... which hold all of a run when each of its ranks 0 .. world size - 1 reported in that hour
                 -- (its last step before the lookback is then there: a rank's last step time only grows)
    SELECT n.run_id
    FROM near n JOIN (SELECT run_id, max(world_size) AS world_size FROM run_minutes SEMI JOIN runs_now USING (run_id)
                      WHERE minute >= $start - to_minutes(CAST($lookback_minutes AS INTEGER)) - INTERVAL 1 HOUR
                        AND minute < $end
                      GROUP BY run_id) w USING (run_id)
    WHERE n.minute < $start - to_minutes(CAST($lookback_minutes AS INTEGER))
    GROUP BY n.run_id, w.world_size
    HAVING count(DISTINCT n.rank) = w.world_size AND min(n.rank) = 0 AND max(n.rank) = w.world_size - 1
), far AS (      -- further back only for the other runs: a tick's cost does not grow with a long run's age
    SELECT r.run_id, r.rank, r.minute, r.host, r.gpu_index, r.last_step_time
    FROM rank_minutes r SEMI JOIN (SELECT run_id FROM runs_now ANTI JOIN whole USING (run_id)) USING (run_id)
    LEFT JOIN started s ON s.run_id = r.run_id
    WHERE r.minute < $start - to_minutes(CAST($lookback_minutes AS INTEGER)) - INTERVAL 1 HOUR
      AND r.minute >= coalesce(s.started, TIMESTAMP '-infinity') - INTERVAL 1 MINUTE
), ranks AS (
    SELECT run_id, rank, arg_max(host, minute) AS host, arg_max(gpu_index, minute) AS gpu_index,
           max(last_step_time) FILTER (WHERE minute < $start - to_minutes(CAST($lookback_minutes AS INTEGER)))
               AS earlier_step_time
    FROM (SELECT * FROM near UNION ALL SELECT * FROM far)
    GROUP BY run_id, rank
), held AS (
    SELECT run_id, minute, count(*) AS gpus_held
    FROM gm WHERE run_id IN (SELECT run_id FROM ranks)
    GROUP BY run_id, minute
), active AS (
    SELECT run_id, minute FROM held
    UNION
    SELECT run_id, minute FROM rm
), run_last AS (
    SELECT run_id, minute, max(last_step_time) AS run_last_step_time FROM rm GROUP BY run_id, minute
), step_interval AS (
    SELECT run_id, median(step_seconds) AS step_interval_seconds FROM rm GROUP BY run_id
), xids AS (
    SELECT host, gpu_index, minute, last_xid FROM gm WHERE last_xid IS NOT NULL
), grid AS (
    SELECT k.run_id, k.rank, k.host, k.gpu_index, a.minute, k.earlier_step_time,
           max(k.earlier_step_time) OVER (PARTITION BY k.run_id) AS run_earlier_step_time
    FROM ranks k JOIN active a USING (run_id)
)
SELECT g.run_id, g.rank, g.run_id || '/rank-' || g.rank AS entity_id, g.host, g.gpu_index, g.minute,
       g.minute + INTERVAL 1 MINUTE AS tick,
       g.minute + INTERVAL 1 MINUTE > $start AS in_window,
       coalesce(ls.last_step_time, g.earlier_step_time) AS last_step_time,
       coalesce(rl.run_last_step_time, g.run_earlier_step_time) AS run_last_step_time, i.step_interval_seconds,
       coalesce(h.gpus_held, 0) AS gpus_held,
       coalesce(gpu.run_id = g.run_id, false) AS gpu_held,
       gpu.run_id AS gpu_run_id, gpu.samples AS gpu_samples, gpu.utilization_ratio AS gpu_utilization,
       x.last_xid AS gpu_last_xid
FROM grid g
ASOF LEFT JOIN rm ls ON ls.run_id = g.run_id AND ls.rank = g.rank AND ls.minute <= g.minute
ASOF LEFT JOIN run_last rl ON rl.run_id = g.run_id AND rl.minute <= g.minute
ASOF LEFT JOIN xids x ON x.host = g.host AND x.gpu_index = g.gpu_index AND x.minute <= g.minute
LEFT JOIN step_interval i ON i.run_id = g.run_id
LEFT JOIN held h ON h.run_id = g.run_id AND h.minute = g.minute
LEFT JOIN gm gpu ON gpu.host = g.host AND gpu.gpu_index = g.gpu_index AND gpu.minute = g.minute
ORDER BY g.run_id, g.rank, g.minute;
