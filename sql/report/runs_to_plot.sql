-- The runs incident_plots draws: those with open incidents, most recent first; when none is open,
-- the run of the latest incident. `state` identifies the picture's incidents (ids, tiers, status); `last_seen`,
-- how far its series reach (assets/incident_plots.py redraws an unchanged state only as that moves on).
WITH ranked AS (
    SELECT run_id,
           bool_or(status = 'open') AS has_open,
           max(last_seen)           AS last_seen,
           string_agg(incident_id || ':' || tier || ':' || status, ',' ORDER BY incident_id) AS state
    FROM incidents
    WHERE run_id IS NOT NULL
    GROUP BY run_id
)
SELECT run_id, has_open, last_seen, state
FROM ranked
WHERE has_open
   OR (NOT (SELECT coalesce(bool_or(has_open), false) FROM ranked)
       AND last_seen = (SELECT max(last_seen) FROM ranked))
ORDER BY has_open DESC, last_seen DESC, run_id
LIMIT $limit;
