-- Drift of one $kind (input: the feature columns; prediction: predicted label and confidence) per
-- endpoint, model version and hour: how many of those columns drifted against the version's reference
-- (drift_scores, scored over all rows by the drift_reports asset), with the top column's margin to its
-- threshold in noise units (the verdict's uncertainty), over the
-- partition and $lookback_hours before it (in_window false), so persistence sees across hours. The
-- version's training run and checkpoint come from its registration.
WITH hours AS (
    SELECT endpoint, model_version, hour,
           count(*) AS columns_scored,
           count(*) FILTER (WHERE drifted) AS columns_drifted,
           list(column_name ORDER BY score DESC) FILTER (WHERE drifted) AS drifted_columns,
           list(struct_pack(column_name, method, score := round(score, 4), threshold, margin := round(margin, 1))
                ORDER BY column_name) AS scores,
           arg_max(score, CASE WHEN drifted THEN 1 ELSE 0 END * 1e9 + coalesce(score, 0)) AS top_score,
           arg_max(threshold, CASE WHEN drifted THEN 1 ELSE 0 END * 1e9 + coalesce(score, 0)) AS top_threshold,
           arg_max(margin, CASE WHEN drifted THEN 1 ELSE 0 END * 1e9 + coalesce(score, 0)) AS top_margin,
           any_value(report_path) AS report_path,
           any_value(current_rows) AS current_rows, any_value(reference_rows) AS reference_rows,
           any_value(current_sampled) AS current_sampled, any_value(reference_sampled) AS reference_sampled,
           any_value(reference_source) AS reference_source,
           any_value(reference_start) AS reference_start, any_value(reference_end) AS reference_end
    FROM drift_scores
    WHERE kind = $kind
      AND hour >= $start - to_hours(CAST($lookback_hours AS INTEGER)) AND hour < $end
    GROUP BY endpoint, model_version, hour
), lineage AS (
    SELECT model_version, arg_max(run_id, time) AS run_id, arg_max(checkpoint_path, time) AS checkpoint
    FROM lineage_events WHERE event = 'model_version_registered' GROUP BY model_version
)
SELECT h.*, h.hour + INTERVAL 1 HOUR AS tick, h.hour >= $start AS in_window, l.run_id, l.checkpoint
FROM hours h LEFT JOIN lineage l USING (model_version)
ORDER BY endpoint, model_version, hour;
