-- Stored serving and quality incidents whose triage a change can reach (assets/triage.py classify),
-- per row of the registered frame `probes`: NULL matches anything. ep: the incident's endpoint (or
-- entity); host: one of its hosts; signal; mv: its model version; last_seen at or after
-- last_seen_lo; onset at or before onset_hi.
SELECT DISTINCT i.incident_id, i.signal, i.entity_type, i.entity_id, i.pos, i.family, i.onset, i.last_seen, i.run_id, i.hosts, i.gpus,
       i.endpoint, i.model_version, i.correlation_id, i.digest, i.episode, i.members, i.opened, i.last_detected, i.cleared_at
FROM fold_incidents i
JOIN probes p
  ON (p.ep IS NULL OR coalesce(nullif(i.endpoint, ''), i.entity_id) = p.ep)
 AND (p.host IS NULL OR list_contains(i.hosts, p.host))
 AND (p.signal IS NULL OR i.signal = p.signal)
 AND (p.mv IS NULL OR i.model_version = p.mv)
 AND (p.last_seen_lo IS NULL OR i.last_seen >= p.last_seen_lo)
 AND (p.onset_hi IS NULL OR i.onset <= p.onset_hi)
WHERE i.family IN ('serving', 'quality');
