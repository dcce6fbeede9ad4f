-- Per-rank median step time per minute for one run: a straggling rank stands out from its peers.
SELECT rank, date_trunc('minute', time) AS minute, median(step_seconds) AS step_seconds
FROM training_steps
WHERE run_id = $run_id AND step_seconds IS NOT NULL
GROUP BY ALL
ORDER BY rank, minute;
