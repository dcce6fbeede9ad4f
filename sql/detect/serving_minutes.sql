-- Serving minutes per endpoint with their rolling baselines (serving_minutes) and the endpoint's
-- configured SLOs (serving_slos, null where none is set), from $lookback_minutes before the
-- partition to $end; `in_window` marks the partition's minutes. Shared by the serving signals.
SELECT m.endpoint, m.minute,
       m.minute + INTERVAL 1 MINUTE AS tick,
       m.minute + INTERVAL 1 MINUTE > $start AS in_window,
       m.model_version, m.host, m.scrapes,
       m.ttft_p50_seconds, m.ttft_p95_seconds, m.ttft_p99_seconds,
       m.itl_p50_seconds, m.itl_p95_seconds, m.itl_p99_seconds,
       m.ttft_p50_baseline, m.ttft_p95_baseline, m.ttft_p99_baseline,
       m.itl_p50_baseline, m.itl_p95_baseline, m.itl_p99_baseline,
       m.requests_waiting, m.requests_waiting_max, m.requests_waiting_baseline,
       m.requests_running, m.requests_running_max, m.kv_cache_usage_ratio, m.kv_cache_usage_ratio_max,
       m.requests, m.failures, m.counter_resets, m.preemptions, m.requests_per_second, m.requests_per_second_baseline,
       m.error_ratio, m.error_ratio_baseline, m.baseline_minutes,
       s.ttft_p50_seconds AS slo_ttft_p50_seconds, s.ttft_p95_seconds AS slo_ttft_p95_seconds,
       s.ttft_p99_seconds AS slo_ttft_p99_seconds, s.itl_p50_seconds AS slo_itl_p50_seconds,
       s.itl_p95_seconds AS slo_itl_p95_seconds, s.itl_p99_seconds AS slo_itl_p99_seconds,
       s.max_num_seqs AS slo_max_num_seqs, s.error_ratio AS slo_error_ratio
FROM serving_minutes m
LEFT JOIN serving_slos s USING (endpoint)
WHERE m.minute >= $start - to_minutes(CAST($lookback_minutes AS INTEGER)) AND m.minute < $end
ORDER BY m.endpoint, m.minute;
