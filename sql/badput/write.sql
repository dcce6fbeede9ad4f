-- Badput, part 5 of 5: each held sample's seconds split by how much of its interval each window
-- covers, summed per run and minute, and written in place of the window's minutes. Spare GPUs (held
-- by the run, used by no rank) are idle. productive is what is left, so the categories sum to the
-- allocated GPU-seconds exactly. Only the minutes written are split: before $start, and from $write_from
-- (sql/badput/marks.sql) on.
CREATE OR REPLACE TEMP TABLE bp_split AS
WITH windows AS (SELECT * FROM bp_windows UNION ALL SELECT * FROM bp_gaps),
slot AS (
    SELECT *, time + to_microseconds(CAST(slot_seconds * 1e6 AS BIGINT)) AS slot_end FROM bp_slots
    WHERE minute < $start OR minute >= $write_from
),
covered AS (
    SELECT s.run_id, s.time, w.category,
           sum(w.weight * epoch(least(w.w1, s.slot_end) - greatest(w.w0, s.time))) AS seconds
    FROM slot s JOIN windows w ON w.run_id = s.run_id AND w.w0 < s.slot_end AND w.w1 > s.time
    GROUP BY ALL
),
totals AS (
    SELECT run_id, time, sum(seconds) AS covered FROM covered GROUP BY ALL
)
SELECT s.run_id, s.minute, s.time, s.rank_gpus, s.spare_gpus, s.gpu_name, s.slot_seconds,
       o.category,
       -- overlapping windows (clock skew) share the interval; an uncovered rest is unexplained
       s.rank_gpus * s.slot_seconds * o.seconds / greatest(t.covered, s.slot_seconds) AS gpu_seconds
FROM bp_slots s
LEFT JOIN covered o USING (run_id, time)
LEFT JOIN totals t USING (run_id, time)
WHERE s.minute < $start OR s.minute >= $write_from;

DELETE FROM badput_minutes b
WHERE b.minute < $end
  AND ((b.minute >= $start - INTERVAL 2 MINUTE AND (b.minute < $start OR b.minute >= $write_from))
       OR EXISTS (SELECT 1 FROM bp_rewrite r WHERE r.run_id = b.run_id AND b.minute >= r.write_from));

-- the marks this run computed from; a restart's rewrite changed the minutes of earlier partitions: their next
-- run writes whole
DELETE FROM badput_marks WHERE partition_start = $start
   OR (partition_start < $start AND partition_start + INTERVAL 1 HOUR > (SELECT min(write_from) FROM bp_rewrite));
INSERT INTO badput_marks SELECT $start, run_id, minute, fingerprint FROM bp_marks;

-- Sums are rounded to a micro-GPU-second: DuckDB's parallel sums differ in their last bits from run
-- to run, and a re-run of a partition must leave identical rows.
INSERT INTO badput_minutes BY NAME
WITH per_slot AS (
    SELECT run_id, minute, time, any_value(rank_gpus) AS rank_gpus, any_value(spare_gpus) AS spare_gpus,
           any_value(slot_seconds) AS slot_seconds, any_value(gpu_name) AS gpu_name
    FROM bp_split GROUP BY ALL
),
held AS (
    SELECT run_id, minute,
           round(sum((rank_gpus + spare_gpus) * slot_seconds), 6) AS allocated,
           round(sum(spare_gpus * slot_seconds), 6)               AS spare,
           max(rank_gpus + spare_gpus)                  AS gpus,
           mode(gpu_name)                               AS gpu_name
    FROM per_slot GROUP BY ALL
),
split AS (
    SELECT run_id, minute,
           coalesce(round(sum(gpu_seconds) FILTER (category = 'startup'), 6), 0)         AS startup,
           coalesce(round(sum(gpu_seconds) FILTER (category = 'checkpoint_save'), 6), 0) AS checkpoint_save,
           coalesce(round(sum(gpu_seconds) FILTER (category = 'data_stall'), 6), 0)      AS data_stall,
           coalesce(round(sum(gpu_seconds) FILTER (category = 'evaluation'), 6), 0)      AS evaluation,
           coalesce(round(sum(gpu_seconds) FILTER (category = 'hang'), 6), 0)            AS hang,
           coalesce(round(sum(gpu_seconds) FILTER (category = 'idle'), 6), 0)            AS idle,
           coalesce(round(sum(gpu_seconds) FILTER (category = 'slow_steps'), 6), 0)      AS slow_steps,
           coalesce(round(sum(gpu_seconds) FILTER (category = 'wasted_progress'), 6), 0) AS wasted_progress,
           coalesce(round(sum(gpu_seconds) FILTER (category = 'productive'), 6), 0)      AS productive_covered
    FROM bp_split GROUP BY ALL
),
stepping AS (
    SELECT run_id, minute,
           count(*) FILTER (NOT discarded)                                    AS steps_completed,
           median(ideal_step_seconds)                                         AS ideal_step_seconds,
           median(model_flops_per_second) FILTER (NOT discarded)              AS model_flops_per_second,
           median(reported_flops_per_second) FILTER (NOT discarded)           AS reported_flops_per_second
    FROM bp_steps GROUP BY ALL
),
peaks AS (
    SELECT unnest($peak_patterns) AS pattern, unnest($peak_precisions) AS precision, unnest($peak_flops) AS flops
),
rows AS (
    SELECT h.run_id, h.minute,
           coalesce((SELECT max(a.attempt) FROM bp_attempts a WHERE a.run_id = h.run_id AND a.started_at < h.minute + INTERVAL 1 MINUTE), 0) AS attempt,
           coalesce((SELECT arg_max(a.precision, a.started_at) FROM bp_attempts a WHERE a.run_id = h.run_id AND a.started_at < h.minute + INTERVAL 1 MINUTE), $default_precision) AS precision,
           h.gpus, h.allocated, h.spare, h.gpu_name, s.*, st.steps_completed, st.ideal_step_seconds,
           st.model_flops_per_second, st.reported_flops_per_second
    FROM held h
    JOIN split s USING (run_id, minute)
    LEFT JOIN stepping st USING (run_id, minute)
    WHERE h.minute < $end
),
priced AS (
    SELECT r.*,
           (SELECT arg_max(p.flops, length(p.pattern)) FROM peaks p
             WHERE contains(lower(r.gpu_name), p.pattern) AND p.precision = lower(r.precision)) AS peak
    FROM rows r
)
SELECT run_id, minute, attempt, CAST(gpus AS INTEGER) AS gpus,
       allocated AS allocated_gpu_seconds,
       allocated - (startup + checkpoint_save + data_stall + evaluation + hang + idle + spare + slow_steps + wasted_progress
                    + greatest(allocated - spare - startup - checkpoint_save - data_stall - evaluation - hang - idle
                               - slow_steps - wasted_progress - productive_covered, 0)) AS productive_gpu_seconds,
       startup AS startup_gpu_seconds,
       checkpoint_save AS checkpoint_save_gpu_seconds,
       data_stall AS data_stall_gpu_seconds,
       evaluation AS evaluation_gpu_seconds,
       hang AS hang_gpu_seconds,
       idle + spare AS idle_gpu_seconds,
       slow_steps AS slow_steps_gpu_seconds,
       wasted_progress AS wasted_progress_gpu_seconds,
       greatest(allocated - spare - startup - checkpoint_save - data_stall - evaluation - hang - idle
                - slow_steps - wasted_progress - productive_covered, 0) AS unexplained_gpu_seconds,
       CAST(coalesce(steps_completed, 0) AS INTEGER) AS steps_completed,
       ideal_step_seconds,
       gpu_name,
       lower(precision) AS precision,
       peak AS peak_flops_per_gpu,
       model_flops_per_second,
       reported_flops_per_second,
       coalesce(model_flops_per_second, reported_flops_per_second) / peak AS mfu,
       model_flops_per_second / peak AS mfu_from_model_flops,
       reported_flops_per_second / peak AS mfu_from_reported_tflops
FROM priced;

SELECT count(*) FROM badput_minutes WHERE minute >= $start AND minute < $end;
