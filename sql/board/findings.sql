-- The findings folded into one incident (its signal and entity, within its span), newest last;
-- each names the hourly partition whose check evaluation flagged it.
SELECT f.partition_start, f.entity_id, f.onset, f.detected_at, f.last_seen, f.value, f.threshold, f.baseline
FROM findings f, (SELECT * FROM incidents WHERE incident_id = $incident_id) i
WHERE f.signal = i.signal
  AND (f.entity_id = i.entity_id OR list_contains(i.members, f.entity_id))
  AND f.last_seen >= i.onset AND f.onset <= coalesce(i.resolved, i.last_seen)
ORDER BY f.detected_at, f.entity_id
LIMIT 50;
