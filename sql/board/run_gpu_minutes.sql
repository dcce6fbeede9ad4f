-- One run's GPUs per minute (GPU x minute heatmaps): utilization, power, temperature, SM clock.
SELECT host || ':' || gpu_index AS gpu, date_trunc('minute', time) AS minute,
       avg(utilization_ratio) AS utilization_ratio, avg(power_watts) AS power_watts,
       avg(temperature_celsius) AS temperature_celsius, avg(sm_clock_hertz) AS sm_clock_hertz
FROM gpu_samples
WHERE run_id = $run_id
GROUP BY host, gpu_index, minute
ORDER BY host, gpu_index, minute;
