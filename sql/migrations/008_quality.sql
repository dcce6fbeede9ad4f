-- Model quality: drift history and the reference window each model version is judged against.

-- One row per endpoint, model version, hour and column: the drift score evidently computed for the
-- hour's predictions against the version's reference window (see version_references below).
-- kind: 'input' (a feature) or 'prediction' (the predicted label, the confidence). The row counts
-- are the full window's (DuckDB); *_sampled are the rows evidently saw (sampled above a configured
-- size, docs/signals.md "Quality signals"). report_path is the evidently HTML report, relative to
-- GOODPUT_HOME.
CREATE TABLE drift_scores (
    endpoint                      VARCHAR   NOT NULL,
    model_version                 VARCHAR   NOT NULL,
    hour                          TIMESTAMP NOT NULL,
    kind                          VARCHAR   NOT NULL,
    column_name                   VARCHAR   NOT NULL,
    column_type                   VARCHAR   NOT NULL,
    method                        VARCHAR   NOT NULL,
    score                         DOUBLE,
    threshold                     DOUBLE,
    drifted                       BOOLEAN,
    current_rows                  BIGINT,
    reference_rows                BIGINT,
    current_sampled               BIGINT,
    reference_sampled             BIGINT,
    current_mean                  DOUBLE,
    reference_mean                DOUBLE,
    reference_start               TIMESTAMP,
    reference_end                 TIMESTAMP,
    reference_source              VARCHAR,
    report_path                   VARCHAR
);

-- The reference window of every model version an endpoint has served:
--   'registered': the window named by its model_version_registered event (payload reference_start /
--     reference_end): the endpoint's traffic the version was validated on, whichever version served it;
--   'first_stable': else the first `reference_minutes` of its own predictions on the endpoint,
--     starting `settle_minutes` after it began serving there (its promotion, or its first prediction
--     for a version that was serving before the lineage begins), so a canary's warm-up is left out.
-- A table macro, so every quality query reads the same definition with its configured minutes.
CREATE MACRO version_references(settle_minutes, reference_minutes) AS TABLE
WITH served AS (
    SELECT endpoint, model_version, min(time) AS first_prediction
    FROM predictions WHERE model_version IS NOT NULL GROUP BY endpoint, model_version
), promoted AS (
    SELECT endpoint, model_version, min(time) AS promoted_at
    FROM lineage_events WHERE event = 'model_version_promoted' GROUP BY endpoint, model_version
), registered AS (
    SELECT model_version,
           arg_max(TRY_CAST(payload ->> 'reference_start' AS TIMESTAMP), time) AS reference_start,
           arg_max(TRY_CAST(payload ->> 'reference_end' AS TIMESTAMP), time) AS reference_end,
           arg_max(run_id, time) AS run_id, arg_max(checkpoint_path, time) AS checkpoint_path
    FROM lineage_events WHERE event = 'model_version_registered' GROUP BY model_version
)
SELECT s.endpoint, s.model_version,
       coalesce(p.promoted_at, s.first_prediction) AS serving_since,
       p.promoted_at,
       CASE WHEN r.reference_start IS NOT NULL AND r.reference_end > r.reference_start THEN 'registered'
            ELSE 'first_stable' END AS reference_source,
       CASE WHEN r.reference_start IS NOT NULL AND r.reference_end > r.reference_start THEN r.reference_start
            ELSE coalesce(p.promoted_at, s.first_prediction) + to_minutes(CAST(settle_minutes AS INTEGER)) END AS reference_start,
       CASE WHEN r.reference_start IS NOT NULL AND r.reference_end > r.reference_start THEN r.reference_end
            ELSE coalesce(p.promoted_at, s.first_prediction)
                 + to_minutes(CAST(settle_minutes AS INTEGER) + CAST(reference_minutes AS INTEGER)) END AS reference_end,
       -- a registered window is the endpoint's traffic whatever served it; a first-stable one the version's own
       CASE WHEN r.reference_start IS NOT NULL AND r.reference_end > r.reference_start THEN NULL
            ELSE s.model_version END AS reference_version,
       r.run_id, r.checkpoint_path
FROM served s
LEFT JOIN promoted p USING (endpoint, model_version)
LEFT JOIN registered r USING (model_version);
