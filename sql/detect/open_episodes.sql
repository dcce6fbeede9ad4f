-- The episodes still open when partition $start begins, of every signal (a check step reads them once for
-- all its signals: checks/asset_checks.py, shared_read): per signal and entity, its latest finding
-- from an earlier partition that reaches to within $grace_minutes of $start, unless a clearing after
-- that finding says the fault is over. The check hands them to its detector (`episode_last_seen`,
-- `episode_onset`, `episode_reference` columns), so an episode continues on the fault's own evidence
-- and against the healthy reference it opened with, however long ago its onset left the lookback.
WITH latest AS (
    SELECT signal, entity_id, arg_max(onset, last_seen) AS onset, max(last_seen) AS last_seen,
           arg_max(TRY_CAST(evidence ->> 'held_reference' AS DOUBLE), last_seen) AS reference
    FROM findings
    WHERE partition_start < $start
      AND last_seen >= $start - to_minutes(CAST($grace_minutes AS INTEGER)) AND last_seen <= $start
    GROUP BY signal, entity_id
)
SELECT l.signal, l.entity_id, l.onset, l.last_seen, l.reference
FROM latest l
WHERE NOT EXISTS (
    SELECT 1 FROM clearings c
    WHERE c.signal = l.signal AND c.entity_id = l.entity_id AND c.partition_start < $start AND c.cleared_at > l.last_seen
)
ORDER BY l.signal, l.entity_id;
