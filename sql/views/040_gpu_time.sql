-- gpu_time: one row per GPU sample held by a run, with the seconds it stands for (the GPU's median
-- sample interval) and what they went to, first match wins:
--   busy_not_progressing  inside a stall window of the run (stall_windows)
--   lost_to_restarts      inside a restart's lost window (restarts: downtime, start-up, replay)
--   productive            inside a step: between a step's start (its end minus step_seconds, else
--                         the rank's previous step's end) and its end (the next step record to end)
--   idle_allocated        held by the run between steps: start-up, checkpoint saves, waits
--
-- gpu_time_of(run_ids): the same rows for the samples held by the runs in the list `run_ids` only
-- (NULL: every run), computed from those runs' GPUs and steps alone. The windows are per GPU and per
-- (run, rank), so each row equals gpu_time's while the cost is those GPUs' and runs' only: the goodput
-- view asks it for the runs the badput asset has not accounted (usually none), restart_cost for the
-- runs that restarted, instead of classifying every sample of the cluster (issue 19, page speed).
CREATE OR REPLACE MACRO gpu_time_of(run_ids) AS TABLE
WITH intervals AS (
    SELECT *, epoch(lead(time) OVER (PARTITION BY host, gpu_index ORDER BY time) - time) AS gap_seconds
    FROM gpu_samples
    -- whole GPUs only (every window below is per GPU), so a row is the same as over all samples
    WHERE run_ids IS NULL
       OR (host, gpu_index) IN (SELECT host, gpu_index FROM gpu_samples WHERE list_contains(run_ids, run_id))
),
sampled AS (
    SELECT *, median(gap_seconds) OVER (PARTITION BY host, gpu_index) AS sample_seconds
    FROM intervals
),
held AS (
    SELECT time, host, gpu_index, gpu_uuid, run_id, utilization_ratio, power_watts,
           coalesce(sample_seconds, 0) AS sample_seconds
    FROM sampled
    WHERE run_id IS NOT NULL AND (run_ids IS NULL OR list_contains(run_ids, run_id))
),
-- every step record (not grouped by step number: a restart replays the same numbers later)
steps AS (
    SELECT run_id, step, time AS step_end,
           coalesce(time - to_microseconds(CAST(step_seconds * 1e6 AS BIGINT)),
                    lag(time) OVER (PARTITION BY run_id, rank ORDER BY time)) AS step_start
    FROM training_steps
    WHERE run_ids IS NULL OR list_contains(run_ids, run_id)   -- whole runs: the window is per (run, rank)
),
placed AS (
    SELECT h.*, s.step, s.step_start, s.step_end
    FROM held h
    ASOF LEFT JOIN steps s ON h.run_id = s.run_id AND h.time <= s.step_end
)
SELECT p.time,
       CAST(p.time AS DATE) AS day,
       p.host,
       p.gpu_index,
       p.host || ':' || p.gpu_index AS gpu,
       p.gpu_uuid,
       p.run_id,
       coalesce(r.team, p.run_id) AS team,
       p.utilization_ratio,
       p.power_watts,
       p.sample_seconds,
       CASE
           WHEN EXISTS (SELECT 1 FROM stall_windows w
                         WHERE w.run_id = p.run_id AND p.time >= w.stall_start AND p.time < w.stall_end)
               THEN 'busy_not_progressing'
           WHEN EXISTS (SELECT 1 FROM restarts x
                         WHERE x.run_id = p.run_id AND p.time >= x.lost_from AND p.time < x.lost_until)
               THEN 'lost_to_restarts'
           WHEN p.step_start IS NOT NULL AND p.time >= p.step_start THEN 'productive'
           ELSE 'idle_allocated'
       END AS category
FROM placed p
LEFT JOIN runs r ON r.run_id = p.run_id;

CREATE OR REPLACE VIEW gpu_time AS
SELECT * FROM gpu_time_of(NULL);
