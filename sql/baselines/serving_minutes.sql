-- Replace one hour of serving_minutes: per endpoint and minute, the scrapes summarised (latency
-- quantile gauges as medians, queue / running / KV cache as mean and max, counter increases with
-- resets handled: requests, failures, preemptions) and the endpoint's own trailing $window_minutes
-- medians (current minute excluded).
DELETE FROM serving_minutes WHERE minute >= $start AND minute < $end;
INSERT INTO serving_minutes BY NAME
WITH scrapes AS (
    SELECT *,
           request_success_total - lag(request_success_total) OVER p AS d_success,
           request_failure_total - lag(request_failure_total) OVER p AS d_failure,
           preemptions_total - lag(preemptions_total) OVER p AS d_preemptions,
           lag(time) OVER p AS previous_time
    FROM serving_metrics
    WHERE time >= $start - to_minutes(CAST($window_minutes AS INTEGER) + 1) AND time < $end
    WINDOW p AS (PARTITION BY endpoint ORDER BY time)
),
increases AS (
    -- a counter that went down was reset (the server restarted): what it counts since is its value
    SELECT *,
           (d_success < 0 OR d_failure < 0) AS reset,
           CASE WHEN reset THEN request_success_total ELSE d_success END AS success_increase,
           CASE WHEN reset THEN request_failure_total ELSE d_failure END AS failure_increase,
           -- the preemption counter restarts with the server, or on its own (it went down)
           CASE WHEN reset OR d_preemptions < 0 THEN preemptions_total ELSE d_preemptions END AS preemptions_increase
    FROM scrapes
),
per_minute AS (
    SELECT endpoint,
           time_bucket(INTERVAL 1 MINUTE, time) AS minute,
           arg_max(model_version, time) AS model_version,
           arg_max(host, time) AS host,
           count(*)::INTEGER AS scrapes,
           median(ttft_p50_seconds) AS ttft_p50_seconds,
           median(ttft_p95_seconds) AS ttft_p95_seconds,
           median(ttft_p99_seconds) AS ttft_p99_seconds,
           median(itl_p50_seconds) AS itl_p50_seconds,
           median(itl_p95_seconds) AS itl_p95_seconds,
           median(itl_p99_seconds) AS itl_p99_seconds,
           avg(requests_waiting) AS requests_waiting,
           max(requests_waiting) AS requests_waiting_max,
           avg(requests_running) AS requests_running,
           max(requests_running) AS requests_running_max,
           avg(kv_cache_usage_ratio) AS kv_cache_usage_ratio,
           max(kv_cache_usage_ratio) AS kv_cache_usage_ratio_max,
           sum(success_increase) + sum(failure_increase) AS requests,
           sum(failure_increase) AS failures,
           sum(preemptions_increase) AS preemptions,
           count(*) FILTER (WHERE reset)::INTEGER AS counter_resets,
           (sum(success_increase) + sum(failure_increase))
               / nullif(sum(epoch(time - previous_time)) FILTER (WHERE success_increase IS NOT NULL), 0)
               AS requests_per_second
    FROM increases
    GROUP BY ALL
),
ratios AS (
    SELECT *, failures / nullif(requests, 0) AS error_ratio FROM per_minute
)
SELECT *,
       median(ttft_p50_seconds) OVER w AS ttft_p50_baseline,
       median(ttft_p95_seconds) OVER w AS ttft_p95_baseline,
       median(ttft_p99_seconds) OVER w AS ttft_p99_baseline,
       median(itl_p50_seconds) OVER w AS itl_p50_baseline,
       median(itl_p95_seconds) OVER w AS itl_p95_baseline,
       median(itl_p99_seconds) OVER w AS itl_p99_baseline,
       median(requests_waiting) OVER w AS requests_waiting_baseline,
       median(requests_per_second) OVER w AS requests_per_second_baseline,
       median(error_ratio) OVER w AS error_ratio_baseline,
       CAST($window_minutes AS INTEGER) AS baseline_window_minutes,
       (count(*) OVER w)::INTEGER AS baseline_minutes
FROM ratios
WINDOW w AS (PARTITION BY endpoint ORDER BY minute
             RANGE BETWEEN to_minutes(CAST($window_minutes AS INTEGER)) PRECEDING AND INTERVAL 1 MINUTE PRECEDING)
QUALIFY minute >= $start
ORDER BY endpoint, minute;
SELECT count(*) FROM serving_minutes WHERE minute >= $start AND minute < $end;
