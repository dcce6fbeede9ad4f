-- Productive vs wasted GPU-hours per UTC day, team and cause (the Cluster page sums it by day and by team).
SELECT day, team, count(DISTINCT run_id) AS runs, sum(allocated_gpu_hours) AS allocated_gpu_hours,
       sum(productive_gpu_hours) AS productive_gpu_hours,
       sum(busy_not_progressing_gpu_hours) AS busy_not_progressing_gpu_hours,
       sum(idle_allocated_gpu_hours) AS idle_allocated_gpu_hours,
       sum(lost_to_restarts_gpu_hours) AS lost_to_restarts_gpu_hours, sum(wasted_gpu_hours) AS wasted_gpu_hours
FROM goodput
GROUP BY day, team;
