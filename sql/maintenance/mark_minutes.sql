-- Before retention deletes findings and evaluation marks (maintenance/delete_minutes.sql, same transaction):
-- mark every (signal, partition) before the cutoff for the incident fold (assets/incidents_incremental.py). It
-- digests each against what it saw: those that lost rows refold (a group deleted whole drops its incidents),
-- the others refold nothing. So the marks need not repeat the retention's own predicates.
INSERT INTO fold_marks
SELECT signal, partition_start FROM findings WHERE partition_start < $minutes_before
UNION
SELECT signal, partition_start FROM evaluations WHERE partition_start < $minutes_before
EXCEPT
SELECT signal, partition_start FROM fold_marks;
