-- Every (signal, partition) with findings, clearings or an evaluation mark, or that the fold last
-- saw: a full fold treats them all as written.
SELECT DISTINCT signal, partition_start
FROM (SELECT signal, partition_start FROM findings
      UNION ALL SELECT signal, partition_start FROM clearings
      UNION ALL SELECT signal, partition_start FROM evaluations
      UNION ALL SELECT signal, partition_start FROM fold_seen
      UNION ALL SELECT signal, partition_start FROM fold_evaluations)
ORDER BY ALL;
