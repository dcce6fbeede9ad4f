-- incident_timeline: one row per thing that happened around an incident, in time order: the
-- incident's own milestones (onset, opened, each finding, last seen, resolved with the evidence
-- that cleared it) and its run's
-- lineage (the run's start, the checkpoint it can resume from and later ones, restarts, the end).
CREATE OR REPLACE VIEW incident_timeline AS
WITH milestones AS (
    SELECT incident_id, onset AS time, 'onset' AS kind, 'problem began: ' || title AS detail FROM incidents
    UNION ALL
    SELECT incident_id, opened, 'opened', 'first detected [' || tier || ', owner ' || owner || ']' FROM incidents
    UNION ALL
    SELECT incident_id, last_seen, 'last_seen', 'last flagged; ' || round(gpu_hours_at_risk, 2) || ' GPU-h at risk' FROM incidents
    UNION ALL
    SELECT incident_id, resolved, 'resolved', coalesce(resolution, 'clean since last seen') FROM incidents WHERE resolved IS NOT NULL
),
found AS (
    SELECT i.incident_id, f.detected_at AS time, 'finding' AS kind,
           f.signal || ' on ' || f.entity_id || ': value ' || round(f.value, 1) || ' vs threshold ' || round(f.threshold, 1)
               || ' (partition ' || strftime(f.partition_start, '%Y-%m-%d %H:%M') || ')' AS detail
    FROM incidents i
    JOIN findings f ON f.signal = i.signal AND f.entity_id = i.entity_id
                   AND f.detected_at >= i.opened AND f.detected_at <= i.last_seen
),
resume_point AS (
    SELECT i.incident_id, i.run_id,
           coalesce((SELECT max(c.time) FROM lineage_events c WHERE c.event = 'checkpoint_saved'
                      AND c.run_id = i.run_id AND c.time <= i.onset), TIMESTAMP '-infinity') AS since,
           coalesce(i.resolved, i.last_seen) AS until
    FROM incidents i
    WHERE i.run_id IS NOT NULL
),
lineage AS (
    SELECT p.incident_id, e.time, e.event AS kind,
           CASE e.event
               WHEN 'checkpoint_saved' THEN 'checkpoint at step ' || e.step || ': ' || coalesce(e.checkpoint_path, '?')
               WHEN 'run_started' THEN 'run ' || e.run_id || ' started (job ' || coalesce(e.payload ->> 'job', '?')
                                       || ', git ' || coalesce(left(e.payload ->> 'git_sha', 12), '?') || ')'
               WHEN 'run_ended' THEN 'run ' || e.run_id || ' ended: ' || coalesce(e.payload ->> 'status', '?')
               ELSE e.event || coalesce(' ' || e.model_version, '') || coalesce(' on ' || e.endpoint, '')
           END AS detail
    FROM resume_point p
    JOIN lineage_events e ON e.run_id = p.run_id
    WHERE e.event = 'run_started' OR (e.time >= p.since AND e.time <= p.until + INTERVAL 1 HOUR)
)
SELECT t.incident_id, i.signal, i.tier, i.run_id, t.time, t.kind, t.detail
FROM (SELECT * FROM milestones UNION ALL SELECT * FROM found UNION ALL SELECT * FROM lineage) t
JOIN incidents i USING (incident_id)
ORDER BY t.incident_id, t.time, t.kind;
