-- Drift scores of the last $hours hours up to $end, per endpoint, version, column: the plot's data.
SELECT endpoint, model_version, hour, kind, column_name, method, score, threshold, drifted
FROM drift_scores
WHERE hour >= $end - to_hours(CAST($hours AS INTEGER)) AND hour < $end
ORDER BY endpoint, column_name, hour;
