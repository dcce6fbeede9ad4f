-- Real sources: a GPU that fell off the bus, serving metrics (Prometheus: vLLM / Triton style),
-- prediction logs and their late-arriving outcomes.

-- The NVML agent records a GPU that fell off the bus (NVML: GPU is lost); its other fields are null.
ALTER TABLE gpu_samples ADD COLUMN gpu_lost BOOLEAN;

-- One row per endpoint, model version and query step, pulled from Prometheus (vLLM names by default).
-- Latency quantiles come from the histograms over the configured rate window.
CREATE TABLE serving_metrics (
    time                          TIMESTAMP NOT NULL,
    endpoint                      VARCHAR   NOT NULL,
    model_version                 VARCHAR,
    host                          VARCHAR,
    ttft_p50_seconds              DOUBLE,
    ttft_p95_seconds              DOUBLE,
    ttft_p99_seconds              DOUBLE,
    itl_p50_seconds               DOUBLE,
    itl_p95_seconds               DOUBLE,
    itl_p99_seconds               DOUBLE,
    e2e_latency_p50_seconds       DOUBLE,
    e2e_latency_p95_seconds       DOUBLE,
    e2e_latency_p99_seconds       DOUBLE,
    requests_waiting              DOUBLE,
    requests_running              DOUBLE,
    kv_cache_usage_ratio          DOUBLE,
    request_success_total         DOUBLE,
    request_failure_total         DOUBLE,
    source_file                   VARCHAR   NOT NULL,
    source_line                   INTEGER   NOT NULL
);

-- One row per served prediction. `outcome` / `outcome_time` are filled when the producer knows
-- them at write time; outcomes that arrive later go to `prediction_outcomes` and join by request id.
CREATE TABLE predictions (
    time                          TIMESTAMP NOT NULL,
    endpoint                      VARCHAR   NOT NULL,
    model_version                 VARCHAR,
    request_id                    VARCHAR   NOT NULL,
    features                      JSON,
    prediction                    VARCHAR,
    confidence                    DOUBLE,
    outcome                       VARCHAR,
    outcome_time                  TIMESTAMP,
    source_file                   VARCHAR   NOT NULL,
    source_line                   INTEGER   NOT NULL
);

-- Outcomes (labels, business results) that arrive hours after the prediction; `time` is when the
-- outcome became known, so each lands in its own hour's partition.
CREATE TABLE prediction_outcomes (
    time                          TIMESTAMP NOT NULL,
    request_id                    VARCHAR   NOT NULL,
    endpoint                      VARCHAR,
    outcome                       VARCHAR,
    source_file                   VARCHAR   NOT NULL,
    source_line                   INTEGER   NOT NULL
);

-- Predictions with their outcome, wherever it arrived from (inline, or later by request id).
CREATE VIEW predictions_with_outcomes AS
SELECT p.time, p.endpoint, p.model_version, p.request_id, p.features, p.prediction, p.confidence,
       coalesce(p.outcome, o.outcome) AS outcome,
       coalesce(p.outcome_time, o.time) AS outcome_time
FROM predictions p
LEFT JOIN (
    SELECT request_id, arg_max(outcome, time) AS outcome, max(time) AS time
    FROM prediction_outcomes GROUP BY request_id
) o USING (request_id);
