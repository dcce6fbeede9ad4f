-- What the last fold saw of the (signal, partition)s in the registered frame `marked`.
SELECT s.signal, s.partition_start, s.entity_type, s.entity_id, s.kind, s.digest, s.n, s.first_at, s.last_at
FROM fold_seen s
JOIN marked m ON m.signal = s.signal AND m.partition_start = s.partition_start;
