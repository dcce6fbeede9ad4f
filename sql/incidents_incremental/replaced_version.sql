-- Of the stored incidents (fold_incidents) of a serving or quality incident's signal on its endpoint
-- of the version a promotion replaced (assets/triage.py classify, rule 2's `earlier`), only the one
-- that comes last in the fold's order (group key, then pos), less the ids in `gone`: classify names
-- the last, and only whether there is one decides. One row per promotion, however long the
-- endpoint's history. Per row of the registered `xs` (signal, ep, promoted_lo, promoted_hi), the
-- promotions of `promotions` (endpoint, previous_version, promoted_at) on its endpoint within
-- promoted_lo .. promoted_hi: every one rule 2 can pick (a superset: a row no target's rule reads
-- changes nothing).
WITH replaced AS (
    SELECT DISTINCT x.signal, x.ep, p.previous_version AS mv, p.promoted_at
    FROM xs x
    JOIN promotions p ON p.endpoint = x.ep AND p.promoted_at BETWEEN x.promoted_lo AND x.promoted_hi
)
SELECT i.incident_id, i.signal, i.entity_type, i.entity_id, i.pos, i.family, i.onset, i.last_seen, i.run_id, i.hosts, i.gpus,
       i.endpoint, i.model_version, i.correlation_id, i.digest, i.episode, i.members, i.opened, i.last_detected, i.cleared_at
FROM fold_incidents i
JOIN replaced r ON i.signal = r.signal AND i.model_version = r.mv AND coalesce(nullif(i.endpoint, ''), i.entity_id) = r.ep
               AND i.onset < r.promoted_at
WHERE i.incident_id NOT IN (SELECT incident_id FROM gone)
QUALIFY row_number() OVER (PARTITION BY r.signal, r.ep, r.mv, r.promoted_at
                           ORDER BY i.entity_type DESC, i.entity_id DESC, i.pos DESC) = 1;
