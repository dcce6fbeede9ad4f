-- The Now page's headline: open incidents, correlated groups, and GPU-hours at risk with each
-- group counted once (open_incident_groups), beside the naive per-incident sum.
SELECT (SELECT count(*) FROM open_incidents)                         AS open_incidents,
       (SELECT count(*) FROM open_incidents WHERE family = 'monitor') AS monitor_incidents,
       count(*)                                                      AS groups,
       coalesce(sum(gpu_hours_at_risk), 0.0)                         AS gpu_hours_at_risk,
       coalesce(sum(gpu_hours_at_risk_summed), 0.0)                  AS gpu_hours_at_risk_summed
FROM open_incident_groups;
