-- open_incidents: incidents still open, most urgent first (tier, then the oldest), with every
-- column of `incidents` (new ones appear here when a migration adds them) plus how long each has
-- lasted in data time. Alerts about Goodput itself (monitor_incidents: stale, failing) are among
-- them, family 'monitor'. group_gpu_hours_at_risk: the GPU-hours at risk of the incident's
-- correlated group counted once (open_incident_groups); sum that per group, never gpu_hours_at_risk.
CREATE OR REPLACE VIEW open_incidents AS
WITH open AS (
    SELECT * FROM incidents WHERE status = 'open'
    UNION ALL BY NAME
    SELECT * FROM monitor_incidents WHERE status = 'open'
)
SELECT o.*,
       o.last_seen - o.onset               AS lasted,
       epoch(o.last_seen - o.onset) / 60.0 AS lasted_minutes,
       g.gpu_hours_at_risk                 AS group_gpu_hours_at_risk,
       g.incidents                         AS group_incidents
FROM open o
LEFT JOIN open_incident_groups g ON g.group_id = coalesce(o.correlation_id, o.incident_id)
ORDER BY o.tier, o.opened;
