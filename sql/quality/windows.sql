-- The (endpoint, model version) windows of one hour [$start, $end) that drift can be judged on: the
-- version's predictions in the hour after its reference window ended, with the row counts of both
-- sides (full windows, counted in DuckDB) and the reference it is judged against.
WITH refs AS (
    SELECT * FROM version_references($settle_minutes, $reference_minutes)
), cur AS (
    SELECT p.endpoint, p.model_version, greatest($start, r.reference_end) AS current_start, count(*) AS current_rows
    FROM predictions p JOIN refs r USING (endpoint, model_version)
    WHERE p.time >= $start AND p.time < $end AND p.time >= r.reference_end
    GROUP BY ALL
)
SELECT c.endpoint, c.model_version, c.current_start, CAST($end AS TIMESTAMP) AS current_end, c.current_rows,
       r.reference_source, r.reference_start, r.reference_end, r.reference_version, r.serving_since, r.promoted_at,
       (SELECT count(*) FROM predictions q
        WHERE q.endpoint = c.endpoint AND q.time >= r.reference_start AND q.time < r.reference_end
          AND (r.reference_version IS NULL OR q.model_version = r.reference_version)) AS reference_rows
FROM cur c JOIN refs r USING (endpoint, model_version)
ORDER BY c.endpoint, c.model_version;
