-- Every GPU of the cluster per UTC hour: mean utilization and the share of samples held by a run.
SELECT host || ':' || gpu_index AS gpu, date_trunc('hour', time) AS hour,
       avg(utilization_ratio) AS utilization_ratio,
       avg(CASE WHEN run_id IS NULL THEN 0.0 ELSE 1.0 END) AS allocated_ratio
FROM gpu_samples
GROUP BY host, gpu_index, hour
ORDER BY host, gpu_index, hour;
