-- Every clearing a check recorded (the evidence that an episode's fault is over), oldest first: the
-- fold resolves an episode only on one of these (after its clean windows).
SELECT signal, entity_type, entity_id, partition_start, last_seen, cleared_at, evidence
FROM clearings
ORDER BY signal, entity_id, cleared_at, partition_start;
