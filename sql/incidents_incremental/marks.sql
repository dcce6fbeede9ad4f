-- The (signal, partition)s written since the last fold (sql/migrations/140_fold_marks.sql).
SELECT DISTINCT signal, partition_start FROM fold_marks ORDER BY ALL;
