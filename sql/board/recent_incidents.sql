-- The most recently resolved incidents (for context on the Now page).
SELECT incident_id, tier, title, signal, family, entity_id, run_id, onset, resolved, gpu_hours_at_risk, owner
FROM (SELECT * FROM incidents UNION ALL BY NAME SELECT * FROM monitor_incidents)
WHERE status = 'resolved'
ORDER BY resolved DESC, incident_id
LIMIT $limit;
