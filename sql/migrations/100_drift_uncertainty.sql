-- Drift verdicts over all rows, with their uncertainty (assets/drift.py, sql/quality/drift_stats.sql).
-- score, threshold and drifted are now computed in DuckDB on every row of both windows (no longer on
-- evidently's sample); *_sampled are the rows the evidently HTML report saw (0 when none was written).
-- noise: sqrt(1/n + 1/m), the scale of the distance between two draws of one distribution (n, m: the
-- column's non-null values per side). margin: (score - threshold) / noise, the verdict's distance from
-- flipping in those units (positive: drifted); |margin| < 2 is a verdict near the threshold.
ALTER TABLE drift_scores ADD COLUMN noise DOUBLE;
ALTER TABLE drift_scores ADD COLUMN margin DOUBLE;
