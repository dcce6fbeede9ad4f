-- The evaluation marks of the (signal, partition)s in the registered frame `marked`.
SELECT e.signal, e.partition_start, e.evaluated_until
FROM evaluations e
JOIN marked m ON m.signal = e.signal AND m.partition_start = e.partition_start
WHERE e.partition_start BETWEEN $lo AND $hi;
