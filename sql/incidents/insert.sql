-- Insert `new_incidents` and `new_transitions` (inside the caller's transaction, after its deletes:
-- incidents/replace.sql for a full fold, incidents_incremental/store.sql for the changed ones).
INSERT INTO incidents BY NAME
SELECT incident_id, signal, family, tier, status, title, onset, opened, last_seen, resolved,
       entity_type, entity_id, run_id::VARCHAR AS run_id, rank::INTEGER AS rank, hosts::VARCHAR[] AS hosts,
       gpus::VARCHAR[] AS gpus, endpoint::VARCHAR AS endpoint, model_version::VARCHAR AS model_version,
       checkpoint::VARCHAR AS checkpoint, owner, playbook, evidence::JSON AS evidence, gpu_hours_at_risk,
       triage_class::VARCHAR AS triage_class, correlation_id::VARCHAR AS correlation_id, findings,
       default_tier::VARCHAR AS default_tier, tier_reason::VARCHAR AS tier_reason, escalated_at::TIMESTAMP AS escalated_at,
       episode::INTEGER AS episode, previous_incident_id::VARCHAR AS previous_incident_id,
       ranks::INTEGER[] AS ranks, members::VARCHAR[] AS members, resolution::VARCHAR AS resolution
FROM new_incidents ORDER BY opened, incident_id;
INSERT INTO incident_transitions BY NAME
SELECT incident_id, seq::INTEGER AS seq, transition, transition_at::TIMESTAMP AS transition_at, tier, reason, gpu_hours_at_risk::DOUBLE AS gpu_hours_at_risk
FROM new_transitions ORDER BY transition_at, incident_id, seq;
