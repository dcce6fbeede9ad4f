-- The drift verdict's statistics of every column over ALL rows of both windows (no sample): the
-- current side (one version, [$current_start, $current_end)) against the reference side
-- ([$reference_start, $reference_end), of $reference_version unless null). Columns: every key of
-- `features`, plus `prediction` and `confidence`. A column is numerical when every non-null value
-- on both sides is a JSON number (evidently's reading of a pandas numeric dtype), else categorical;
-- nulls and missing keys are left out, as evidently drops them.
--   numerical: the first Wasserstein distance between the two empirical distributions, exactly
--     (the integral of |F_cur - F_ref| over the merged distinct values), divided by the reference's
--     population standard deviation (floor 0.001): evidently's `wasserstein` (normed) on all rows;
--   categorical: the Jensen-Shannon distance (natural log) of the two sides' category shares:
--     evidently's `jensenshannon` on all rows.
-- n / m: the non-null values per side (the noise of the score scales with sqrt(1/n + 1/m)).
WITH sides AS (
    SELECT 'current' AS side, features, prediction, confidence FROM predictions
    WHERE endpoint = $endpoint AND model_version = $version AND time >= $current_start AND time < $current_end
    UNION ALL
    SELECT 'reference', features, prediction, confidence FROM predictions
    WHERE endpoint = $endpoint AND time >= $reference_start AND time < $reference_end
      AND ($reference_version IS NULL OR model_version = $reference_version)
), feature_counts AS (   -- the pass over the rows: each row's JSON parsed once (into a map), its values counted
    SELECT side, e.key AS column_name, e.value AS j, count(*) AS k
    FROM (SELECT side, unnest(map_entries(TRY_CAST(features AS MAP(VARCHAR, JSON)))) AS e FROM sides)
    GROUP BY ALL
), cells AS (   -- per side, column and distinct non-null value: its JSON type, its text and its count
    SELECT side, column_name, json_type(j) AS t, j ->> '$' AS text, k FROM feature_counts WHERE json_type(j) <> 'NULL'
    UNION ALL
    SELECT side, 'prediction', 'VARCHAR', prediction, count(*) FROM sides WHERE prediction IS NOT NULL GROUP BY ALL
    UNION ALL
    SELECT side, 'confidence', 'DOUBLE', CAST(confidence AS VARCHAR), count(*) FROM sides WHERE confidence IS NOT NULL GROUP BY ALL
), value_counts AS (   -- everything from here reads distinct values only
    SELECT column_name, text, bool_and(t IN ('BIGINT', 'UBIGINT', 'DOUBLE', 'HUGEINT')) AS is_number,
           coalesce(sum(k) FILTER (WHERE side = 'current'), 0) AS c, coalesce(sum(k) FILTER (WHERE side = 'reference'), 0) AS r
    FROM cells GROUP BY column_name, text
), columns AS (
    SELECT column_name, bool_and(is_number) AS numerical, sum(c) AS n, sum(r) AS m
    FROM value_counts GROUP BY column_name
    HAVING n > 0 AND m > 0   -- a column both sides have
), num_counts AS (   -- "1" and "1.0" are one value
    SELECT column_name, CAST(text AS DOUBLE) AS x, sum(c) AS c, sum(r) AS r
    FROM value_counts JOIN columns USING (column_name) WHERE numerical GROUP BY ALL
), num_means AS (
    SELECT column_name, sum(c * x) / any_value(n) AS current_mean, sum(r * x) / any_value(m) AS reference_mean
    FROM num_counts JOIN columns USING (column_name) GROUP BY column_name
), num_moments AS (   -- two passes: no cancellation for large values with a small spread
    SELECT column_name, any_value(current_mean) AS current_mean, any_value(reference_mean) AS reference_mean,
           sqrt(sum(r * (x - reference_mean) ** 2) / any_value(m)) AS reference_std
    FROM num_counts JOIN num_means USING (column_name) JOIN columns USING (column_name) GROUP BY column_name
), gaps AS (    -- F_cur - F_ref on [x, next x): the empirical CDFs after each distinct value
    SELECT column_name,
           CAST(sum(c) OVER w AS DOUBLE) / n - CAST(sum(r) OVER w AS DOUBLE) / m AS gap,
           lead(x) OVER (PARTITION BY column_name ORDER BY x) - x AS dx
    FROM num_counts JOIN columns USING (column_name)
    WINDOW w AS (PARTITION BY column_name ORDER BY x ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
), wasserstein AS (
    SELECT column_name, coalesce(sum(abs(gap) * dx), 0) AS distance FROM gaps GROUP BY column_name
), shares AS (
    SELECT column_name, CAST(c AS DOUBLE) / n AS p, CAST(r AS DOUBLE) / m AS q
    FROM value_counts JOIN columns USING (column_name) WHERE NOT numerical
), jensen_shannon AS (
    SELECT column_name,
           sqrt(greatest(0, sum(CASE WHEN p > 0 THEN p * ln(p / ((p + q) / 2)) ELSE 0 END      -- 0 ln 0 = 0
                              + CASE WHEN q > 0 THEN q * ln(q / ((p + q) / 2)) ELSE 0 END) / 2)) AS distance
    FROM shares GROUP BY column_name
)
SELECT c.column_name, CASE WHEN c.numerical THEN 'num' ELSE 'cat' END AS column_type, c.n, c.m,
       CASE WHEN c.numerical THEN w.distance / greatest(mo.reference_std, 0.001) ELSE js.distance END AS score,
       mo.current_mean, mo.reference_mean
FROM columns c
LEFT JOIN num_moments mo USING (column_name)
LEFT JOIN wasserstein w USING (column_name)
LEFT JOIN jensen_shannon js USING (column_name)
ORDER BY c.column_name;
