-- Stored incidents (fold_incidents) whose span comes within reach of one of the registered `frontier`
-- rows (lo = onset - the correlation window, hi = last_seen + it) and that share a run, GPU or host
-- with it: the candidates for a correlation edge (assets/correlation.py linked decides). $lo/$hi: the
-- least lo and the greatest hi of the frontier.
SELECT DISTINCT i.incident_id, i.signal, i.entity_type, i.entity_id, i.pos, i.family, i.onset, i.last_seen, i.run_id, i.hosts, i.gpus,
       i.endpoint, i.model_version, i.correlation_id, i.digest, i.episode, i.members, i.opened, i.last_detected, i.cleared_at
FROM fold_incidents i
JOIN frontier f ON i.onset <= f.hi AND i.last_seen >= f.lo
WHERE i.onset <= $hi AND i.last_seen >= $lo   -- the frontier's whole span first: the join sees the few stored incidents near it
  AND (i.run_id = f.run_id OR list_has_any(i.gpus, f.gpus) OR list_has_any(i.hosts, f.hosts));
