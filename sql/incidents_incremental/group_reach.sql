-- Per refolded group (the registered `dirty`: its key and how far back a change reaches, d c e, as
-- assets/incidents_incremental.py _starts says), the first stored episode a refold starts from (k),
-- and of the group's stored incidents (fold_incidents) only what that refold reads: every episode
-- from k on and, before k, per member, the latest episode that holds it (fold_group reopens the
-- latest earlier episode that shares a member; no other earlier one can be it). `reached`: the
-- episode running at the earliest changed finding (the last opened before d), the first whose
-- clearing a changed clearing can take (none, or at or after c), e, and at most the last; k: back
-- from there to an episode that opens after the one before it was last detected (one that opens
-- while the one before is still detected is read with it). Each row carries its group's k.
WITH stored AS MATERIALIZED (
    SELECT i.incident_id, i.signal, i.entity_type, i.entity_id, i.pos, i.members,
           i.pos = 0 OR lag(i.last_detected) OVER (g ORDER BY i.pos) < i.opened AS opens,
           least(count(*) OVER g - 1,
                 CASE WHEN d.d IS NOT NULL THEN greatest(count(*) FILTER (WHERE i.opened < d.d) OVER g - 1, 0) END,
                 CASE WHEN d.c IS NOT NULL
                      THEN coalesce(min(i.pos) FILTER (WHERE i.cleared_at IS NULL OR i.cleared_at >= d.c) OVER g, count(*) OVER g) END,
                 d.e) AS reached
    FROM fold_incidents i
    JOIN dirty d ON d.signal = i.signal AND d.entity_type = i.entity_type AND d.entity_id = i.entity_id
    WINDOW g AS (PARTITION BY i.signal, i.entity_type, i.entity_id)
),
marked AS (
    SELECT incident_id, signal, entity_type, entity_id, pos, members,
           max(pos) FILTER (WHERE opens AND pos <= reached) OVER (PARTITION BY signal, entity_type, entity_id) AS k
    FROM stored
),
read AS (
    SELECT incident_id, k FROM marked WHERE pos >= k
    UNION ALL
    SELECT DISTINCT incident_id, k FROM (SELECT incident_id, signal, entity_type, entity_id, pos, k, unnest(members) AS member
                                         FROM marked WHERE pos < k)
    QUALIFY row_number() OVER (PARTITION BY signal, entity_type, entity_id, member ORDER BY pos DESC) = 1
)
SELECT i.incident_id, i.signal, i.entity_type, i.entity_id, i.pos, i.family, i.onset, i.last_seen, i.run_id, i.hosts, i.gpus,
       i.endpoint, i.model_version, i.correlation_id, i.digest, i.episode, i.members, i.opened, i.last_detected, i.cleared_at, r.k
FROM read r JOIN fold_incidents i ON i.incident_id = r.incident_id
ORDER BY i.signal, i.entity_type, i.entity_id, i.pos;
