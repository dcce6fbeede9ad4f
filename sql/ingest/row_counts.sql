-- Rows in each ingest table and in the quarantine, for the demo's summary line.
SELECT 'gpu_samples', count(*) FROM gpu_samples
UNION ALL SELECT 'training_steps', count(*) FROM training_steps
UNION ALL SELECT 'lineage_events', count(*) FROM lineage_events
UNION ALL SELECT 'serving_metrics', count(*) FROM serving_metrics
UNION ALL SELECT 'predictions', count(*) FROM predictions
UNION ALL SELECT 'prediction_outcomes', count(*) FROM prediction_outcomes
UNION ALL SELECT 'quarantined', count(*) FROM quarantine;
