-- open_incident_groups: the open incidents per correlated group (correlation_id, else the incident
-- alone), with the group's GPU-hours at risk counted once: the union over its GPUs of the stretches
-- [onset, last_seen] its open incidents flag on each GPU. Two incidents about one hang (the run
-- busy but not progressing, and its GPUs idle in the collective) count its GPUs' time once.
-- The total at risk is sum(gpu_hours_at_risk) of this view.
CREATE OR REPLACE VIEW open_incident_groups AS
WITH open AS (
    SELECT incident_id, coalesce(correlation_id, incident_id) AS group_id, tier, onset, last_seen, gpus
    FROM incidents WHERE status = 'open'
),
spans AS (
    SELECT group_id, unnest(gpus) AS gpu, onset, last_seen FROM open
),
marked AS (
    SELECT *, max(last_seen) OVER (PARTITION BY group_id, gpu ORDER BY onset, last_seen
                                   ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS reach
    FROM spans
),
islands AS (
    SELECT *, sum(CASE WHEN reach IS NULL OR onset > reach THEN 1 ELSE 0 END)
                  OVER (PARTITION BY group_id, gpu ORDER BY onset, last_seen) AS island
    FROM marked
),
merged AS (
    SELECT group_id, gpu, island, min(onset) AS s, max(last_seen) AS e FROM islands GROUP BY ALL
),
hours AS (
    SELECT group_id, sum(epoch(e - s)) / 3600 AS gpu_hours_at_risk, count(DISTINCT gpu) AS gpus
    FROM merged GROUP BY group_id
)
SELECT o.group_id,
       count(*)                                  AS incidents,
       min(o.tier)                               AS tier,
       list(o.incident_id ORDER BY o.onset, o.incident_id) AS incident_ids,
       min(o.onset)                              AS onset,
       max(o.last_seen)                          AS last_seen,
       coalesce(any_value(h.gpus), 0)            AS gpus,
       coalesce(any_value(h.gpu_hours_at_risk), 0.0) AS gpu_hours_at_risk,
       sum(o.gpu_hours_at_risk)                  AS gpu_hours_at_risk_summed
FROM (SELECT op.*, i.gpu_hours_at_risk FROM open op JOIN incidents i USING (incident_id)) o
LEFT JOIN hours h USING (group_id)
GROUP BY o.group_id;
