-- Prediction confidence per endpoint and model version in [$start, $end) (after the version's
-- reference window) against its reference window (version_references): full-window counts and means
-- in DuckDB, and up to $max_rows confidences per side (a deterministic sample: ordered by a hash of
-- the request id) for the KS test, with their times (the detector finds the minute the evidence was
-- in). `last_time`: the newest prediction judged.
WITH refs AS (
    SELECT * FROM version_references($settle_minutes, $reference_minutes)
), cur AS (
    SELECT p.endpoint, p.model_version, max(p.time) AS last_time,
           count(p.confidence) AS current_rows, avg(p.confidence) AS current_mean,
           list({'time': p.time, 'confidence': p.confidence} ORDER BY hash(p.request_id), p.request_id)
               FILTER (WHERE p.confidence IS NOT NULL)[1:CAST($max_rows AS INTEGER)] AS sampled
    FROM predictions p JOIN refs r USING (endpoint, model_version)
    WHERE p.time >= $start AND p.time < $end AND p.time >= r.reference_end
    GROUP BY ALL
), ref AS (
    SELECT r.endpoint, r.model_version,
           count(q.confidence) AS reference_rows, avg(q.confidence) AS reference_mean,
           list(q.confidence ORDER BY hash(q.request_id), q.request_id)
               FILTER (WHERE q.confidence IS NOT NULL)[1:CAST($max_rows AS INTEGER)] AS reference_sample
    FROM refs r JOIN predictions q
      ON q.endpoint = r.endpoint AND q.time >= r.reference_start AND q.time < r.reference_end
     AND (r.reference_version IS NULL OR q.model_version = r.reference_version)
    WHERE (r.endpoint, r.model_version) IN (SELECT (endpoint, model_version) FROM cur)
    GROUP BY ALL
)
SELECT c.endpoint, c.model_version, greatest(CAST($start AS TIMESTAMP), r.reference_end) AS window_start,
       c.last_time, CAST($end AS TIMESTAMP) AS tick, TRUE AS in_window, c.current_rows, c.current_mean,
       list_transform(c.sampled, x -> x.confidence) AS current_sample,
       list_transform(c.sampled, x -> x.time) AS current_sample_times,
       coalesce(f.reference_rows, 0) AS reference_rows, f.reference_mean, f.reference_sample,
       r.reference_source, r.reference_start, r.reference_end, r.run_id, r.checkpoint_path AS checkpoint
FROM cur c
JOIN refs r USING (endpoint, model_version)
LEFT JOIN ref f USING (endpoint, model_version)
ORDER BY c.endpoint, c.model_version;
