-- The episodes still open when partition $hour begins, of every signal (a check step reads them once for
-- all its signals: checks/asset_checks.py, shared_read): per signal and entity, its latest finding from an
-- earlier partition that reaches to within $grace_minutes of $hour, unless a clearing after that finding
-- says the fault is over. The check hands them to its detector (`episode_last_seen`, `episode_onset`,
-- `episode_reference` columns), so an episode continues on the fault's own evidence and against the
-- healthy reference it opened with, however long ago its onset left the lookback.
-- A live window that begins inside the partition at $start (> $hour; checks/windowed.py) also gets the
-- partition's own stored episodes (`own`) that began by $start and reach to within $grace_minutes of it,
-- as open at most until $start (what it judges again from there is replaced), unless one of the
-- partition's clearings up to $start ends them; the window keeps those its frame does not hold from
-- their start. With $start = $hour there are none.
WITH earlier AS (
    SELECT signal, entity_id, arg_max(onset, last_seen) AS onset, max(last_seen) AS last_seen,
           arg_max(TRY_CAST(evidence ->> 'held_reference' AS DOUBLE), last_seen) AS reference, false AS own
    FROM findings
    WHERE partition_start < $hour
      AND last_seen >= $hour - to_minutes(CAST($grace_minutes AS INTEGER)) AND last_seen <= $hour
    GROUP BY signal, entity_id
), own AS (
    SELECT signal, entity_id, arg_max(onset, last_seen) AS onset, max(least(last_seen, $start)) AS last_seen,
           arg_max(TRY_CAST(evidence ->> 'held_reference' AS DOUBLE), last_seen) AS reference, true AS own
    FROM findings
    WHERE partition_start = $hour AND $start > $hour AND onset <= $start
      AND last_seen >= $start - to_minutes(CAST($grace_minutes AS INTEGER))
    GROUP BY signal, entity_id
)
SELECT l.signal, l.entity_id, l.onset, l.last_seen, l.reference, l.own
FROM (SELECT * FROM earlier UNION ALL SELECT * FROM own) l
WHERE NOT EXISTS (
    SELECT 1 FROM clearings c
    WHERE c.signal = l.signal AND c.entity_id = l.entity_id AND c.cleared_at > l.last_seen
      AND (c.partition_start < $hour OR (l.own AND c.partition_start = $hour AND c.cleared_at <= $start))
)
ORDER BY l.signal, l.entity_id, l.own;
