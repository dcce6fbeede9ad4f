-- The (signal, partition)s holding findings ('f') or clearings ('c') of the registered groups
-- `dirty_groups`, as the last fold saw them, with the latest time in them (detected_at; cleared_at).
SELECT s.signal, s.entity_type, s.entity_id, s.partition_start, s.kind, s.last_at
FROM fold_seen s
JOIN dirty_groups d ON d.signal = s.signal AND d.entity_type = s.entity_type AND d.entity_id = s.entity_id;
