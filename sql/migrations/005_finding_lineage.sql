-- Findings speak of more than runs: checkpoint audits name the checkpoint, serving and quality
-- signals the endpoint and model version, and a triage class (regression after a promotion,
-- drift on a stable version, infrastructure). Detectors that do not know them leave them null.
ALTER TABLE findings ADD COLUMN endpoint VARCHAR;
ALTER TABLE findings ADD COLUMN model_version VARCHAR;
ALTER TABLE findings ADD COLUMN checkpoint VARCHAR;
ALTER TABLE findings ADD COLUMN triage_class VARCHAR;
