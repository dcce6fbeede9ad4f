-- Cheap statistics of the full windows, in DuckDB: rows and mean of every numeric feature and of the
-- confidence, on the current side (one version, [$current_start, $current_end)) and the reference
-- side ([$reference_start, $reference_end), of $reference_version unless null). Non-numeric features
-- get a null mean.
WITH sides AS (
    SELECT 'current' AS side, features, confidence FROM predictions
    WHERE endpoint = $endpoint AND model_version = $version AND time >= $current_start AND time < $current_end
    UNION ALL
    SELECT 'reference', features, confidence FROM predictions
    WHERE endpoint = $endpoint AND time >= $reference_start AND time < $reference_end
      AND ($reference_version IS NULL OR model_version = $reference_version)
), keyed AS (
    SELECT side, features, unnest(json_keys(features)) AS column_name FROM sides WHERE features IS NOT NULL
)
SELECT side, column_name, count(*) AS rows, avg(TRY_CAST(features ->> column_name AS DOUBLE)) AS mean
FROM keyed GROUP BY ALL
UNION ALL
SELECT side, 'confidence', count(*), avg(confidence) FROM sides GROUP BY ALL
ORDER BY side, column_name;
