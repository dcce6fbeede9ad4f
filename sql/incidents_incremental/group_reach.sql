-- Per refolded group (the registered `dirty`: its key and how far back a change reaches, d c e, as
-- assets/incidents_incremental.py _starts says), the first stored episode a refold starts from (k),
-- and of the group's stored incidents (fold_incidents) only what that refold reads: every episode
-- from k on, and before k, per member, the latest episode that holds it (fold_group reopens the
-- latest earlier episode that shares a member; no other earlier one can be it). k: the episode
-- running at the earliest changed finding (the last opened before d), the first whose clearing a
-- changed clearing can take (none, or at or after c), e, and at most the last; then back to where
-- an episode opens after the one before it ended (an episode that opens while the one before is
-- still detected is read with it).
WITH stored AS (
    SELECT i.*, d.d, d.c, d.e,
           i.pos = 0 OR lag(i.last_detected) OVER (PARTITION BY i.signal, i.entity_type, i.entity_id ORDER BY i.pos) < i.opened
               AS opens
    FROM fold_incidents i
    JOIN dirty d ON d.signal = i.signal AND d.entity_type = i.entity_type AND d.entity_id = i.entity_id
),
reach AS (
    SELECT signal, entity_type, entity_id,
           least(count(*) - 1,
                 CASE WHEN any_value(d) IS NOT NULL THEN greatest(count(*) FILTER (WHERE opened < d) - 1, 0) END,
                 CASE WHEN any_value(c) IS NOT NULL
                      THEN coalesce(min(pos) FILTER (WHERE cleared_at IS NULL OR cleared_at >= c), count(*)) END,
                 any_value(e)) AS reached
    FROM stored
    GROUP BY ALL
),
starts AS (
    SELECT s.signal, s.entity_type, s.entity_id, max(s.pos) AS k
    FROM stored s
    JOIN reach r ON r.signal = s.signal AND r.entity_type = s.entity_type AND r.entity_id = s.entity_id
    WHERE s.opens AND s.pos <= r.reached
    GROUP BY ALL
),
marked AS (
    SELECT s.*, t.k FROM stored s
    JOIN starts t ON t.signal = s.signal AND t.entity_type = s.entity_type AND t.entity_id = s.entity_id
),
latest AS (   -- before k: per member, the latest episode that holds it
    SELECT DISTINCT incident_id FROM (
        SELECT incident_id, signal, entity_type, entity_id, pos, unnest(members) AS member FROM marked WHERE pos < k
    )
    QUALIFY row_number() OVER (PARTITION BY signal, entity_type, entity_id, member ORDER BY pos DESC) = 1
)
SELECT incident_id, signal, entity_type, entity_id, pos, family, onset, last_seen, run_id, hosts, gpus,
       endpoint, model_version, correlation_id, digest, episode, members, opened, last_detected, cleared_at, k
FROM marked
WHERE pos >= k OR incident_id IN (SELECT incident_id FROM latest)
ORDER BY signal, entity_type, entity_id, pos;
