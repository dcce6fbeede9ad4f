-- The open incidents the `incidents` asset's check speaks of (monitor incidents among them), most
-- urgent first, with their correlated group's GPU-hours at risk counted once.
SELECT incident_id, tier, title, family, signal, entity_type, entity_id, run_id, endpoint, gpus, onset, owner,
       gpu_hours_at_risk, group_gpu_hours_at_risk, coalesce(correlation_id, incident_id) AS group_id
FROM open_incidents
ORDER BY tier, group_gpu_hours_at_risk DESC NULLS LAST, opened, incident_id;
