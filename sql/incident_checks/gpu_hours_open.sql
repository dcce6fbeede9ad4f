-- GPU-hours at risk of the open incidents, each correlated group counted once (open_incident_groups).
SELECT coalesce(sum(gpu_hours_at_risk), 0.0) AS gpu_hours_at_risk, count(*) AS groups FROM open_incident_groups;
