-- The findings (sql/incidents/findings.sql, filled in at the findings marker) of the groups in the
-- registered frame `dirty_groups` (signal, group_type, group_id), in the fold's order.
WITH f AS (/*@findings*/)
SELECT f.*
FROM f
JOIN dirty_groups d ON d.signal = f.signal
 AND d.group_type = CASE WHEN f.entity_type = 'rank' AND f.run_id IS NOT NULL AND f.run_id <> '' THEN 'run' ELSE f.entity_type END
 AND d.group_id = CASE WHEN f.entity_type = 'rank' AND f.run_id IS NOT NULL AND f.run_id <> '' THEN f.run_id ELSE f.entity_id END
ORDER BY f.signal, f.entity_id, f.detected_at, f.partition_start;
