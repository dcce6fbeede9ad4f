-- One endpoint per minute: latency quantiles (s), queue, KV cache, request rate and errors.
SELECT minute, model_version, ttft_p50_seconds, ttft_p95_seconds, ttft_p99_seconds, itl_p50_seconds, itl_p95_seconds,
       itl_p99_seconds, requests_waiting, requests_running, kv_cache_usage_ratio, requests_per_second, error_ratio
FROM serving_minutes
WHERE endpoint = $endpoint
ORDER BY minute;
