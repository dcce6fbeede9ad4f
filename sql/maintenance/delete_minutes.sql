-- Retention of the per-minute series, findings and incidents (`retention.minutes_days`): rows
-- before $minutes_before. Findings go by whole (signal, incident entity) group, only when the
-- group's newest finding is older (so a long open incident keeps its onset and id); evaluation
-- marks only before the oldest finding kept (so a kept incident resolves as before); incidents and
-- transitions follow at the next fold, which folds what is left.
DELETE FROM run_minutes WHERE minute < $minutes_before;
DELETE FROM run_starts s WHERE NOT EXISTS (SELECT 1 FROM run_minutes m WHERE m.run_id = s.run_id);
DELETE FROM rank_minutes WHERE minute < $minutes_before;
DELETE FROM gpu_minutes WHERE minute < $minutes_before;
DELETE FROM gpu_counter_minutes WHERE minute < $minutes_before;
DELETE FROM serving_minutes WHERE minute < $minutes_before;
DELETE FROM findings f
WHERE f.partition_start < $minutes_before
  AND NOT EXISTS (
      SELECT 1 FROM findings g
      WHERE g.signal = f.signal AND g.last_seen >= $minutes_before
        AND (CASE WHEN g.entity_type = 'rank' AND coalesce(g.run_id, '') <> '' THEN 'run|' || g.run_id ELSE g.entity_type || '|' || g.entity_id END)
          = (CASE WHEN f.entity_type = 'rank' AND coalesce(f.run_id, '') <> '' THEN 'run|' || f.run_id ELSE f.entity_type || '|' || f.entity_id END));
DELETE FROM evaluations
WHERE partition_start < least($minutes_before,
                              coalesce((SELECT min(partition_start) FROM findings), $minutes_before) - INTERVAL 1 HOUR);
-- a shard's marks (migration 150) go with the hour's mark they add up to
DELETE FROM shard_evaluations s
WHERE s.partition_start < $minutes_before
  AND NOT EXISTS (SELECT 1 FROM evaluations e WHERE e.signal = s.signal AND e.partition_start = s.partition_start);
DELETE FROM lineage_events WHERE time < $minutes_before;
DELETE FROM checkpoint_audits WHERE partition_start < $minutes_before;
DELETE FROM checkpoint_problems WHERE partition_start < $minutes_before;
DELETE FROM checkpoint_restart_points WHERE partition_start < $minutes_before;
DELETE FROM drift_scores WHERE hour < $minutes_before;
