-- Stored incidents (fold_incidents) the triage of the registered serving and quality incidents `xs`
-- looks at (assets/triage.py classify), but for rule 2's (replaced_version.sql): a GPU incident
-- without a run on one of its hosts, or a capacity incident on its endpoint, overlapping it (onset -
-- slack .. last_seen: lo, hi; $lo/$hi: the least lo and the greatest hi, a scan's scalar bounds first).
SELECT i.incident_id, i.signal, i.entity_type, i.entity_id, i.pos, i.family, i.onset, i.last_seen, i.run_id, i.hosts, i.gpus,
       i.endpoint, i.model_version, i.correlation_id, i.digest, i.episode, i.members, i.opened, i.last_detected, i.cleared_at
FROM fold_incidents i
JOIN xs x ON i.onset <= x.hi AND i.last_seen >= x.lo
WHERE i.onset <= $hi AND i.last_seen >= $lo
  AND ((i.family = 'gpu' AND i.run_id IS NULL AND list_has_any(i.hosts, x.hosts))
       OR (i.signal IN ('serving_queue_growth', 'serving_batch_saturation') AND coalesce(nullif(i.endpoint, ''), i.entity_id) = x.ep));
