-- One endpoint's drift history: the score per column and hour against the version's reference
-- window, and the report (relative to GOODPUT_HOME) to open.
SELECT model_version, hour, "column", kind, method, score, threshold, drifted, current_rows, reference_rows,
       reference_start, reference_end, report_path
FROM drift_history
WHERE endpoint = $endpoint
ORDER BY hour, kind, "column";
