-- Outcome rate (share of labelled predictions whose outcome equals the prediction) per endpoint and
-- model version for the predictions made in [$start, $end) shifted back by $outcome_wait_minutes:
-- outcomes arrive late, so the partition judges the prediction hour whose outcomes have had time to
-- arrive. Only outcomes known before $end count (a backfill sees what a live run saw). Compared with
-- the same rate over the version's reference window (version_references).
WITH refs AS (
    SELECT * FROM version_references($settle_minutes, $reference_minutes)
), judged AS (
    SELECT $start - to_minutes(CAST($outcome_wait_minutes AS INTEGER)) AS from_time,
           $end - to_minutes(CAST($outcome_wait_minutes AS INTEGER)) AS until_time
), cur AS (
    SELECT p.endpoint, p.model_version, greatest(any_value(j.from_time), any_value(r.reference_end)) AS window_start,
           any_value(j.until_time) AS window_end,
           count(*) AS current_predictions,
           count(*) FILTER (WHERE p.outcome IS NOT NULL AND p.outcome_time < $end) AS current_labelled,
           count(*) FILTER (WHERE p.outcome IS NOT NULL AND p.outcome_time < $end AND p.outcome = p.prediction) AS current_hits,
           -- the evidence is in once the newest outcome counted has arrived
           max(p.outcome_time) FILTER (WHERE p.outcome IS NOT NULL AND p.outcome_time < $end) AS detected_at
    FROM predictions_with_outcomes p JOIN refs r USING (endpoint, model_version), judged j
    WHERE p.time >= j.from_time AND p.time < j.until_time AND p.time >= r.reference_end
    GROUP BY p.endpoint, p.model_version
), ref AS (
    SELECT r.endpoint, r.model_version,
           count(*) FILTER (WHERE q.outcome IS NOT NULL AND q.outcome_time < $end) AS reference_labelled,
           count(*) FILTER (WHERE q.outcome IS NOT NULL AND q.outcome_time < $end AND q.outcome = q.prediction) AS reference_hits
    FROM refs r JOIN predictions_with_outcomes q
      ON q.endpoint = r.endpoint AND q.time >= r.reference_start AND q.time < r.reference_end
     AND (r.reference_version IS NULL OR q.model_version = r.reference_version)
    WHERE (r.endpoint, r.model_version) IN (SELECT (endpoint, model_version) FROM cur)
    GROUP BY ALL
)
SELECT c.*, CAST($end AS TIMESTAMP) AS tick, TRUE AS in_window,
       coalesce(f.reference_labelled, 0) AS reference_labelled, coalesce(f.reference_hits, 0) AS reference_hits,
       r.reference_source, r.reference_start, r.reference_end, r.run_id, r.checkpoint_path AS checkpoint
FROM cur c
JOIN refs r USING (endpoint, model_version)
LEFT JOIN ref f USING (endpoint, model_version)
ORDER BY c.endpoint, c.model_version;
