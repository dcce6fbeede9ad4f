-- Every delivery attempt of one incident's transitions (wall-clock UTC), newest last: its own alerts,
-- and the grouped notifications that carried a transition of it (one event, one page: a member reaches
-- a sink inside the event's notification, under its anchor's id), with that notification's key and lead.
SELECT a.transition, a.sink, a.attempt, a.attempted_at, a.outcome, a.status_code, a.error,
       NULL::VARCHAR AS notification, NULL::VARCHAR AS lead_incident_id, NULL::INTEGER AS group_size
FROM alert_attempts a
WHERE a.incident_id = $incident_id
  AND a.attempt_id NOT IN (SELECT attempt_id FROM alert_attempt_members)
UNION ALL
SELECT m.transition, a.sink, a.attempt, a.attempted_at, a.outcome, a.status_code, a.error,
       a.dedup_key AS notification, m.lead_incident_id, m.group_size
FROM alert_attempt_members m
JOIN alert_attempts a USING (attempt_id)
WHERE m.incident_id = $incident_id
ORDER BY attempted_at, sink, attempt;
