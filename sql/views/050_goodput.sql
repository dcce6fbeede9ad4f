-- goodput: GPU-hours per run, team and UTC day, split into productive and wasted (busy but not
-- progressing, idle while allocated, lost to restarts). Built on gpu_time; sum it to any grain.
CREATE OR REPLACE VIEW goodput AS
SELECT run_id,
       team,
       day,
       sum(sample_seconds) / 3600                                                        AS allocated_gpu_hours,
       coalesce(sum(sample_seconds) FILTER (category = 'productive'), 0) / 3600           AS productive_gpu_hours,
       coalesce(sum(sample_seconds) FILTER (category = 'busy_not_progressing'), 0) / 3600 AS busy_not_progressing_gpu_hours,
       coalesce(sum(sample_seconds) FILTER (category = 'idle_allocated'), 0) / 3600       AS idle_allocated_gpu_hours,
       coalesce(sum(sample_seconds) FILTER (category = 'lost_to_restarts'), 0) / 3600     AS lost_to_restarts_gpu_hours,
       coalesce(sum(sample_seconds) FILTER (category <> 'productive'), 0) / 3600          AS wasted_gpu_hours,
       coalesce(sum(sample_seconds) FILTER (category = 'productive'), 0)
           / nullif(sum(sample_seconds), 0)                                               AS goodput_ratio
FROM gpu_time
GROUP BY run_id, team, day;
