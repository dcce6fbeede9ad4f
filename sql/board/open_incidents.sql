-- The Now page: open incidents (monitor incidents among them), most urgent first: tier, then the
-- GPU-hours at risk of the incident's correlated group (counted once), then its own, then the oldest.
-- age: data time since onset (the newest GPU sample or step is "now"); wall-clock for the monitor's own.
WITH data_now AS (
    SELECT greatest((SELECT max(time) FROM gpu_samples), (SELECT max(time) FROM training_steps),
                    (SELECT max(time) FROM serving_metrics)) AS t
)
SELECT o.incident_id, o.tier, o.title, o.signal, o.family, o.entity_type, o.entity_id, o.run_id, o.endpoint,
       o.model_version, o.hosts, o.gpus, o.onset, o.opened, o.last_seen, o.owner, o.checkpoint, o.tier_reason,
       o.gpu_hours_at_risk, coalesce(o.group_gpu_hours_at_risk, o.gpu_hours_at_risk) AS group_gpu_hours_at_risk,
       coalesce(o.group_incidents, 1) AS group_incidents, o.correlation_id,
       CASE WHEN o.family = 'monitor' THEN now()::TIMESTAMP - o.onset ELSE (SELECT t FROM data_now) - o.onset END AS age
FROM open_incidents o
ORDER BY o.tier, group_gpu_hours_at_risk DESC NULLS LAST, o.gpu_hours_at_risk DESC NULLS LAST, o.opened, o.incident_id;
