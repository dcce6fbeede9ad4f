-- The findings (sql/incidents/findings.sql, filled in at the findings marker, reading `scope`) of
-- the groups in the registered frame `dirty_groups` (signal, entity_type, entity_id, since) detected
-- at or after their `since` (NULL: all), read from their partitions only (the registered frame
-- `parts`, bounded by $lo/$hi), in the fold's order.
WITH scope AS (
    SELECT f.* FROM findings f
    JOIN parts p ON p.signal = f.signal AND p.partition_start = f.partition_start
    WHERE f.partition_start BETWEEN $lo AND $hi
),
f AS (/*@findings*/)
SELECT f.*
FROM f
JOIN dirty_groups d ON d.signal = f.signal
 AND d.entity_type = CASE WHEN f.entity_type = 'rank' AND f.run_id IS NOT NULL AND f.run_id <> '' THEN 'run' ELSE f.entity_type END
 AND d.entity_id = CASE WHEN f.entity_type = 'rank' AND f.run_id IS NOT NULL AND f.run_id <> '' THEN f.run_id ELSE f.entity_id END
WHERE d.since IS NULL OR f.detected_at >= d.since
ORDER BY f.signal, f.entity_id, f.detected_at, f.partition_start;
