-- Every delivery attempt of one incident's transitions (wall-clock UTC), newest last.
SELECT transition, sink, attempt, attempted_at, outcome, status_code, error
FROM alert_attempts
WHERE incident_id = $incident_id
ORDER BY attempted_at, sink, attempt;
