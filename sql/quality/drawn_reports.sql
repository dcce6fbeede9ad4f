-- The evidently reports of the hour $start as the last run left them, per window (endpoint, model version): the
-- report, the rows of the current window it was drawn with and the rows it sampled, the reference it compared
-- with, and the columns the last run found drifted. A live tick keeps a report while these hold
-- (assets/drift.py, `kept_report`).
SELECT endpoint, model_version, any_value(report_path) AS report_path, any_value(report_rows) AS report_rows,
       any_value(current_sampled) AS current_sampled, any_value(reference_sampled) AS reference_sampled,
       any_value(reference_start) AS reference_start, any_value(reference_end) AS reference_end,
       coalesce(list_sort(list(column_name) FILTER (WHERE drifted)), []) AS drifted
FROM drift_scores
WHERE hour = $start AND report_path IS NOT NULL AND report_rows IS NOT NULL
GROUP BY endpoint, model_version;
