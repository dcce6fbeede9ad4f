-- The clearings of the (signal, partition)s in the registered frame `parts`, oldest first (the
-- order of sql/incidents/clearings.sql). $lo/$hi bound the partitions read.
SELECT c.signal, c.entity_type, c.entity_id, c.partition_start, c.last_seen, c.cleared_at, c.evidence
FROM clearings c
JOIN parts p ON p.signal = c.signal AND p.partition_start = c.partition_start
WHERE c.partition_start BETWEEN $lo AND $hi
ORDER BY c.signal, c.entity_id, c.cleared_at, c.partition_start;
