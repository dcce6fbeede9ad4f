-- monitor_incidents: alerts about Goodput itself (monitor_alerts: a failed run, stale detect runs,
-- stale raw data) as incident records with the columns of `incidents`: opened by the `opened`
-- transition, resolved by the `resolved` one, family 'monitor', entity 'goodput'. No GPUs, so no
-- GPU-hours at risk: while one is open, Goodput is blind to the cluster's cost.
CREATE OR REPLACE VIEW monitor_incidents AS
WITH o AS (SELECT * FROM monitor_alerts WHERE transition = 'opened'),
     r AS (SELECT incident_id, transition_at AS resolved FROM monitor_alerts WHERE transition = 'resolved')
SELECT o.incident_id,
       o.signal,
       'monitor'                                    AS family,
       o.tier,
       CASE WHEN r.resolved IS NULL THEN 'open' ELSE 'resolved' END AS status,
       o.title,
       o.transition_at                              AS onset,
       o.transition_at                              AS opened,
       coalesce(r.resolved, o.transition_at)        AS last_seen,
       r.resolved,
       'goodput'                                    AS entity_type,
       o.signal                                     AS entity_id,
       NULL::VARCHAR                                AS run_id,
       NULL::INTEGER                                AS rank,
       []::VARCHAR[]                                AS hosts,
       []::VARCHAR[]                                AS gpus,
       NULL::VARCHAR                                AS endpoint,
       NULL::VARCHAR                                AS model_version,
       NULL::VARCHAR                                AS checkpoint,
       o.owner,
       o.playbook,
       o.evidence,
       0.0                                          AS gpu_hours_at_risk,
       NULL::VARCHAR                                AS triage_class,
       NULL::VARCHAR                                AS correlation_id,
       1                                            AS findings,
       o.tier                                       AS default_tier,
       o.tier_reason,
       NULL::TIMESTAMP                              AS escalated_at,
       1                                            AS episode,
       NULL::VARCHAR                                AS previous_incident_id,
       []::INTEGER[]                                AS ranks,
       []::VARCHAR[]                                AS members
FROM o
LEFT JOIN r USING (incident_id);
