-- One endpoint's incidents (serving and quality), newest first.
SELECT incident_id, tier, status, title, onset, last_seen, resolved, model_version, triage_class, owner
FROM incidents
WHERE endpoint = $endpoint
ORDER BY onset DESC, incident_id;
