-- drift_history: one row per endpoint, model version, hour and column: the drift score of that hour's
-- predictions against the version's reference window (evidently's statistic, computed over all rows),
-- the method and threshold, whether it drifted, the verdict's uncertainty (noise: the score's scale
-- between two draws of one distribution; margin: (score - threshold) / noise), and the evidently
-- report to open (relative to GOODPUT_HOME). kind: 'input' (a feature) or 'prediction' (predicted
-- label, confidence).
CREATE OR REPLACE VIEW drift_history AS
SELECT endpoint, model_version, hour, column_name AS "column", kind, column_type, method, score, threshold, drifted, noise, margin,
       current_rows, reference_rows, current_sampled, reference_sampled, current_mean, reference_mean,
       reference_source, reference_start, reference_end, report_path
FROM drift_scores
ORDER BY endpoint, model_version, hour, kind, column_name;
