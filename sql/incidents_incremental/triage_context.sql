-- Stored incidents (fold_incidents) the triage of the registered serving and quality incidents `xs`
-- looks at (assets/triage.py classify): a GPU incident without a run on one of its hosts, or a
-- capacity incident on its endpoint, overlapping it (onset - slack .. last_seen: lo, hi; $lo/$hi:
-- the least lo and the greatest hi, a scan's scalar bounds first); and, per row of `promotions`
-- (the promotion rule 2 finds for one of them: signal, ep, mv the version it replaced, promoted_at),
-- the one incident of that signal on that endpoint of that version with an onset before the
-- promotion that comes last in the fold's order (group key, then pos), less the ids in `gone`:
-- classify names the last of them, and only whether there is one decides. One row per promotion,
-- however long the endpoint's history.
SELECT i.incident_id, i.signal, i.entity_type, i.entity_id, i.pos, i.family, i.onset, i.last_seen, i.run_id, i.hosts, i.gpus,
       i.endpoint, i.model_version, i.correlation_id, i.digest, i.episode, i.members, i.opened, i.last_detected, i.cleared_at
FROM fold_incidents i
JOIN xs x ON i.onset <= x.hi AND i.last_seen >= x.lo
WHERE i.onset <= $hi AND i.last_seen >= $lo
  AND ((i.family = 'gpu' AND i.run_id IS NULL AND list_has_any(i.hosts, x.hosts))
       OR (i.signal IN ('serving_queue_growth', 'serving_batch_saturation') AND coalesce(nullif(i.endpoint, ''), i.entity_id) = x.ep))
UNION
SELECT i.incident_id, i.signal, i.entity_type, i.entity_id, i.pos, i.family, i.onset, i.last_seen, i.run_id, i.hosts, i.gpus,
       i.endpoint, i.model_version, i.correlation_id, i.digest, i.episode, i.members, i.opened, i.last_detected, i.cleared_at
FROM fold_incidents i
JOIN promotions p ON i.signal = p.signal AND i.model_version = p.mv AND coalesce(nullif(i.endpoint, ''), i.entity_id) = p.ep
                 AND i.onset < p.promoted_at
WHERE i.incident_id NOT IN (SELECT incident_id FROM gone)
QUALIFY row_number() OVER (PARTITION BY p.signal, p.ep, p.mv, p.promoted_at
                           ORDER BY i.entity_type DESC, i.entity_id DESC, i.pos DESC) = 1;
