-- Replace the incident records with a fresh deterministic fold (inside the caller's transaction).
DELETE FROM incidents;
INSERT INTO incidents BY NAME
SELECT incident_id, signal, family, tier, status, title, onset, opened, last_seen, resolved,
       entity_type, entity_id, run_id, rank::INTEGER AS rank, hosts::VARCHAR[] AS hosts, gpus::VARCHAR[] AS gpus,
       endpoint::VARCHAR AS endpoint, model_version::VARCHAR AS model_version, checkpoint::VARCHAR AS checkpoint,
       owner, playbook, evidence::JSON AS evidence, gpu_hours_at_risk, triage_class::VARCHAR AS triage_class,
       correlation_id::VARCHAR AS correlation_id, findings
FROM new_incidents ORDER BY opened, incident_id;
