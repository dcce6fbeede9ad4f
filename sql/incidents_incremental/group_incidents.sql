-- The stored incidents (fold_incidents) of the registered groups `dirty_groups`.
SELECT i.*
FROM fold_incidents i
JOIN dirty_groups d ON d.signal = i.signal AND d.entity_type = i.entity_type AND d.entity_id = i.entity_id;
