-- sql/detect/store_findings.sql for one shard's per-GPU signals: clear the findings, clearings and
-- judgements of this shard's GPUs only (entity "host:index"; another shard's rows of the same hour and
-- signal stay) and replace its own evaluation mark (`shard_evaluations`); sql/detect/insert_rows.sql then
-- inserts the new rows. Inside the caller's transaction. Only rows of this shard: two shards' steps commit
-- at once on the lake, and a sum of every shard's marks written here would be a sum of what each saw; the
-- hour's `evaluations` row and fold mark are written once, after every shard, by the hour's
-- `gpu_baselines_all_shards` (sql/shards/sum_evaluations.sql).
DELETE FROM findings WHERE partition_start = $start AND signal IN (SELECT signal FROM new_evaluations)
  AND shard_of(regexp_extract(entity_id, '^(.*):[0-9]+$', 1), $shards::VARCHAR[][]) = $shard;
DELETE FROM clearings WHERE partition_start = $start AND signal IN (SELECT signal FROM new_evaluations)
  AND shard_of(regexp_extract(entity_id, '^(.*):[0-9]+$', 1), $shards::VARCHAR[][]) = $shard;
DELETE FROM judgements WHERE partition_start = $start AND signal IN (SELECT signal FROM new_evaluations)
  AND shard_of(regexp_extract(entity_id, '^(.*):[0-9]+$', 1), $shards::VARCHAR[][]) = $shard;
DELETE FROM shard_evaluations WHERE partition_start = $start AND shard = $shard_name
  AND signal IN (SELECT signal FROM new_evaluations);
INSERT INTO shard_evaluations BY NAME SELECT *, $shard_name AS shard FROM new_evaluations;
