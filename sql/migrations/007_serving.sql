-- Serving baselines: one row per endpoint and minute from serving_metrics, with each endpoint's
-- trailing robust baselines (the current minute excluded), and the per-endpoint SLOs the serving
-- signals compare against (written from the `serving_slos:` section of GOODPUT_HOME/thresholds.yaml).

-- Latency figures are the median over the minute's scrapes of each quantile gauge; queue, running
-- and KV cache the mean and max; requests and failures are counter increases (a counter that went
-- down was reset: the increase is its new value). *_baseline: median over the trailing
-- baseline_window_minutes of the endpoint's own minutes (all model versions, so a promotion is
-- measured against what the endpoint served before it).
CREATE TABLE serving_minutes (
    endpoint                      VARCHAR   NOT NULL,
    minute                        TIMESTAMP NOT NULL,
    model_version                 VARCHAR,              -- the version serving at the minute's last scrape
    host                          VARCHAR,
    scrapes                       INTEGER   NOT NULL,
    ttft_p50_seconds              DOUBLE,
    ttft_p95_seconds              DOUBLE,
    ttft_p99_seconds              DOUBLE,
    itl_p50_seconds               DOUBLE,
    itl_p95_seconds               DOUBLE,
    itl_p99_seconds               DOUBLE,
    requests_waiting              DOUBLE,
    requests_waiting_max          DOUBLE,
    requests_running              DOUBLE,
    requests_running_max          DOUBLE,
    kv_cache_usage_ratio          DOUBLE,
    kv_cache_usage_ratio_max      DOUBLE,
    requests                      DOUBLE,               -- finished requests (success + failure) in the minute
    failures                      DOUBLE,
    counter_resets                INTEGER   NOT NULL,   -- scrapes whose counters went down (server restart)
    requests_per_second           DOUBLE,
    error_ratio                   DOUBLE,
    ttft_p50_baseline             DOUBLE,
    ttft_p95_baseline             DOUBLE,
    ttft_p99_baseline             DOUBLE,
    itl_p50_baseline              DOUBLE,
    itl_p95_baseline              DOUBLE,
    itl_p99_baseline              DOUBLE,
    requests_waiting_baseline     DOUBLE,
    requests_per_second_baseline  DOUBLE,
    error_ratio_baseline          DOUBLE,
    baseline_window_minutes       INTEGER   NOT NULL,
    baseline_minutes              INTEGER   NOT NULL
);

-- Per-endpoint service-level objectives (null: the signal's default threshold applies).
CREATE TABLE serving_slos (
    endpoint                      VARCHAR   PRIMARY KEY,
    ttft_p50_seconds              DOUBLE,
    ttft_p95_seconds              DOUBLE,
    ttft_p99_seconds              DOUBLE,
    itl_p50_seconds               DOUBLE,
    itl_p95_seconds               DOUBLE,
    itl_p99_seconds               DOUBLE,
    max_num_seqs                  DOUBLE,               -- the engine's max concurrent sequences (vLLM --max-num-seqs)
    error_ratio                   DOUBLE
);
