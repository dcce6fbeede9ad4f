-- Every incident transition an alert sink should hear about, oldest first.
WITH t AS (
    SELECT *, 'opened' AS transition, opened AS transition_at FROM incidents
    UNION ALL
    SELECT *, 'resolved' AS transition, resolved AS transition_at FROM incidents WHERE status = 'resolved'
)
SELECT incident_id, transition, transition_at, title, signal, family, tier, status, owner, entity_type, entity_id,
       run_id, rank, hosts, gpus, endpoint, model_version, checkpoint, onset, opened, last_seen, resolved,
       gpu_hours_at_risk, evidence, playbook
FROM t ORDER BY transition_at, incident_id, transition;
