-- Mirror the member transitions each journaled grouped notification carried; an attempt already there is not added again.
INSERT INTO alert_attempt_members BY NAME
SELECT n.attempt_id, n.incident_id, n.seq::INTEGER AS seq, n.transition, n.lead_incident_id::VARCHAR AS lead_incident_id,
       n.group_size::INTEGER AS group_size
FROM new_members n
WHERE n.attempt_id NOT IN (SELECT attempt_id FROM alert_attempt_members);
