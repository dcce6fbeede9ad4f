-- What the incidents asset reports after a fold: incidents, open ones, transitions and escalations,
-- findings, and (signal, entity) groups folded.
SELECT count(*) AS incidents, count(*) FILTER (WHERE status = 'open') AS open,
       (SELECT count(*) FROM incident_transitions) AS transitions,
       (SELECT count(*) FROM incident_transitions WHERE transition = 'escalated') AS escalations,
       (SELECT count(*) FROM findings) AS findings,
       (SELECT count(*) FROM (SELECT DISTINCT signal, entity_type, entity_id FROM fold_incidents)) AS groups
FROM incidents;
