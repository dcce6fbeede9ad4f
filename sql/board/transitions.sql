-- The transitions of one incident (fold or monitor), in order.
SELECT transition, transition_at, tier, reason, gpu_hours_at_risk
FROM (SELECT incident_id, seq, transition, transition_at, tier, reason, gpu_hours_at_risk FROM incident_transitions
      UNION ALL
      SELECT incident_id, CASE transition WHEN 'opened' THEN 0 ELSE 1 END, transition, transition_at, tier,
             coalesce(tier_reason, title), NULL FROM monitor_alerts)
WHERE incident_id = $incident_id
ORDER BY seq, transition_at;
