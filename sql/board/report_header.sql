-- What a drift report file is about (by its path relative to GOODPUT_HOME): endpoint, version, hour
-- and the reference window it was compared with, and how many columns drifted.
SELECT endpoint, model_version, hour, any_value(reference_start) AS reference_start,
       any_value(reference_end) AS reference_end, any_value(reference_source) AS reference_source,
       count(*) FILTER (drifted) AS drifted_columns, count(*) AS columns, max(current_rows) AS current_rows,
       max(reference_rows) AS reference_rows
FROM drift_history
WHERE report_path = $report_path
GROUP BY ALL;
