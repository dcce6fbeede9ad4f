-- The groups with an incident (the first of each) whose last finding falls in one of the registered `regions`
-- (signal, lo, hi): there a change of the evaluation marks can change how it resolves.
SELECT i.signal, i.entity_type, i.entity_id, min(i.pos) AS pos
FROM fold_incidents i
JOIN regions r ON r.signal = i.signal AND i.last_seen >= r.lo AND i.last_seen <= r.hi
GROUP BY ALL;
