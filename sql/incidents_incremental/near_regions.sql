-- The groups with an incident whose last finding falls in one of the registered `regions`
-- (signal, lo, hi): there a change of the evaluation marks can change how it resolves.
SELECT DISTINCT i.signal, i.entity_type, i.entity_id
FROM fold_incidents i
JOIN regions r ON r.signal = i.signal AND i.last_seen >= r.lo AND i.last_seen <= r.hi;
