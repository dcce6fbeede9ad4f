-- `goodput incidents`: the incidents of a status (or 'all') and tier (or NULL), open first, at most $limit.
SELECT incident_id, tier, status, title, onset, last_seen, gpu_hours_at_risk, owner, correlation_id
FROM incidents
WHERE ($status = 'all' OR status = $status) AND ($tier IS NULL OR tier = $tier)
ORDER BY status = 'open' DESC, tier, opened DESC, incident_id
LIMIT $limit
