-- The (signal, partition)s holding findings ('f') or clearings ('c') of the registered groups
-- `dirty_groups`, as the last fold saw them.
SELECT DISTINCT s.signal, s.partition_start, s.kind
FROM fold_seen s
JOIN dirty_groups d ON d.signal = s.signal AND d.entity_type = s.entity_type AND d.entity_id = s.entity_id;
