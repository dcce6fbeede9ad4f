-- Mirror the monitor outbox (registered as `new_monitor_alerts`) into monitor_alerts: each
-- transition once, whatever number of times the outbox is mirrored.
INSERT INTO monitor_alerts
SELECT n.incident_id, n.transition, n.transition_at, n.signal, n.tier, n.owner, n.title, n.tier_reason,
       n.evidence, n.playbook, n.dagster_run_url
FROM new_monitor_alerts n
WHERE NOT EXISTS (SELECT 1 FROM monitor_alerts m WHERE m.incident_id = n.incident_id AND m.transition = n.transition);
