-- The other incidents of an incident's correlated group.
SELECT incident_id, tier, status, title, onset, last_seen, gpu_hours_at_risk, gpus
FROM incidents
WHERE correlation_id = $correlation_id AND incident_id <> $incident_id
ORDER BY onset, incident_id;
