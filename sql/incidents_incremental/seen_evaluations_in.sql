-- The evaluation marks the last fold saw of the (signal, partition)s in the registered frame `marked`.
SELECT s.signal, s.partition_start, s.evaluated_until
FROM fold_evaluations s
JOIN marked m ON m.signal = s.signal AND m.partition_start = s.partition_start;
