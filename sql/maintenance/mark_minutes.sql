-- Before retention deletes findings and evaluation marks (maintenance/delete_minutes.sql, same
-- predicates, same transaction): mark their (signal, partition)s for the incident fold, which then
-- drops the incidents of the groups deleted whole (assets/incidents_incremental.py).
INSERT INTO fold_marks
SELECT DISTINCT f.signal, f.partition_start
FROM findings f
WHERE f.partition_start < $minutes_before
  AND NOT EXISTS (
      SELECT 1 FROM findings g
      WHERE g.signal = f.signal AND g.last_seen >= $minutes_before
        AND (CASE WHEN g.entity_type = 'rank' AND coalesce(g.run_id, '') <> '' THEN 'run|' || g.run_id ELSE g.entity_type || '|' || g.entity_id END)
          = (CASE WHEN f.entity_type = 'rank' AND coalesce(f.run_id, '') <> '' THEN 'run|' || f.run_id ELSE f.entity_type || '|' || f.entity_id END));
INSERT INTO fold_marks
SELECT DISTINCT signal, partition_start FROM evaluations
WHERE partition_start < least($minutes_before,
                              coalesce((SELECT min(partition_start) FROM findings), $minutes_before) - INTERVAL 1 HOUR);
