-- GPUs expected in [$start, $end) that sent no sample in it (not a minute in gpu_minutes): those seen
-- in the hour before, and those named by the `run_started` of a run live in the window (its latest
-- start before $end, not ended before $start). A GPU gone from both (decommissioned, moved out) is
-- not expected, so it is not listed hour after hour.
WITH present AS (
    SELECT DISTINCT host || ':' || gpu_index AS gpu
    FROM gpu_minutes WHERE minute >= $start AND minute < $end
), seen_before AS (
    SELECT DISTINCT host || ':' || gpu_index AS gpu, 'seen in the hour before' AS expected_because
    FROM gpu_minutes WHERE minute >= $start - INTERVAL 1 HOUR AND minute < $start
), started AS (
    SELECT run_id, max(time) AS started, arg_max(payload, time) AS payload
    FROM lineage_events WHERE event = 'run_started' AND time < $end
    GROUP BY run_id
), ended AS (
    SELECT run_id, max(time) AS ended
    FROM lineage_events WHERE event = 'run_ended' AND time < $end
    GROUP BY run_id
), named AS (
    SELECT DISTINCT unnest(CAST(json_extract(s.payload, '$.gpus') AS VARCHAR[])) AS gpu,
           'named by run ' || s.run_id || '''s lineage' AS expected_because
    FROM started s LEFT JOIN ended e USING (run_id)
    WHERE e.ended IS NULL OR e.ended < s.started OR e.ended >= $start
), expected AS (
    SELECT gpu, min(expected_because) AS expected_because
    FROM (SELECT * FROM seen_before UNION ALL SELECT * FROM named)
    WHERE gpu IS NOT NULL
    GROUP BY gpu
)
SELECT gpu, expected_because FROM expected ANTI JOIN present USING (gpu)
ORDER BY gpu;
