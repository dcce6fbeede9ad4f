-- The hour's `evaluations` rows of the per-GPU signals the shards judged: each the sum of every shard's mark
-- (`shard_evaluations`), the row one evaluation of all GPUs writes; and the incident fold's marks of them
-- (sql/detect/store_findings.sql). Run once per hour after every shard (assets/sharded.py), in one transaction.
DELETE FROM evaluations WHERE partition_start = $start
  AND signal IN (SELECT signal FROM shard_evaluations WHERE partition_start = $start);
INSERT INTO evaluations BY NAME
SELECT signal, partition_start, max(evaluated_until) AS evaluated_until, sum(entities)::INTEGER AS entities,
       sum(flagged)::INTEGER AS flagged, list_sort(flatten(list(entity_ids))) AS entity_ids,
       list_sort(flatten(list(flagged_ids))) AS flagged_ids
FROM shard_evaluations
WHERE partition_start = $start
GROUP BY signal, partition_start;
DELETE FROM fold_marks WHERE partition_start = $start
  AND signal IN (SELECT signal FROM shard_evaluations WHERE partition_start = $start);
INSERT INTO fold_marks SELECT DISTINCT signal, $start FROM shard_evaluations WHERE partition_start = $start;
SELECT count(*) FROM gpu_minutes WHERE minute >= $start AND minute < $start + INTERVAL 1 HOUR;
