-- The groups with a finding on a run of the registered frame `changed_runs` (run_id, since) with its
-- onset at or after `since`: its checkpoint may be another one now; the earliest such finding's detection.
SELECT f.signal,
       CASE WHEN f.entity_type = 'rank' AND f.run_id IS NOT NULL AND f.run_id <> '' THEN 'run' ELSE f.entity_type END AS entity_type,
       CASE WHEN f.entity_type = 'rank' AND f.run_id IS NOT NULL AND f.run_id <> '' THEN f.run_id ELSE f.entity_id END AS entity_id,
       min(f.detected_at) AS since
FROM findings f
JOIN changed_runs c ON c.run_id = f.run_id AND f.onset >= c.since
GROUP BY ALL;
