-- Every incident transition (opened, escalated, resolved) an alert sink should hear about, oldest first.
-- `tier` is the tier the alert announces (from that transition on); `current_tier` the incident's now;
-- `resolution` the evidence that cleared it (null while open).
SELECT t.incident_id, t.transition, t.seq, t.transition_at, t.tier, t.reason AS tier_reason,
       t.gpu_hours_at_risk AS transition_gpu_hours, i.tier AS current_tier, i.default_tier,
       i.title, i.signal, i.family, i.status, i.owner, i.entity_type, i.entity_id, i.run_id, i.rank, i.ranks,
       i.hosts, i.gpus, i.endpoint, i.model_version, i.checkpoint, i.onset, i.opened, i.last_seen, i.resolved,
       i.gpu_hours_at_risk, i.evidence, i.playbook, i.correlation_id, i.episode, i.previous_incident_id,
       i.resolution
FROM incident_transitions t
JOIN incidents i USING (incident_id)
ORDER BY t.transition_at, t.incident_id, t.seq;
