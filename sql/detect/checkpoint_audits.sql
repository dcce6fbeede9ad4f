-- Every checkpoint the partition audited, with its problems (kind, file, detail), the model
-- versions registered from it and its run's restart point as of the partition (the newest
-- checkpoint passing every audit, steps and GPU-hours since). The integrity detectors pick the
-- problem kinds they watch; `tick` is the data time the audit stands for.
WITH problems AS (
    SELECT checkpoint, list({'kind': kind, 'file': file, 'detail': detail} ORDER BY kind, file) AS problems
    FROM checkpoint_problems WHERE partition_start = $start
    GROUP BY checkpoint
)
SELECT a.checkpoint, a.path, coalesce(a.recorded_path, a.path) AS checkpoint_path, a.run_id, a.step, a.format,
       a.saved_at, a.tick, TRUE AS in_window, a.partition_start, a.is_new, a.status, a.files, a.bytes, a.model_versions,
       coalesce(p.problems, []) AS problems,
       r.last_good_checkpoint, r.last_good_step, r.last_step, r.steps_since_last_good, r.gpus,
       r.restart_cost_gpu_hours
FROM checkpoint_audits a
LEFT JOIN problems p USING (checkpoint)
LEFT JOIN checkpoint_restart_points r ON r.partition_start = a.partition_start AND r.run_id = a.run_id
WHERE a.partition_start = $start
ORDER BY a.saved_at, a.checkpoint;
