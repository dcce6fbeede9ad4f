-- sql/detect/store_findings.sql for one shard's per-GPU signals: replace the findings, clearings and
-- judgements of this shard's GPUs only (entity "host:index"; another shard's rows of the same hour and
-- signal stay) and its own evaluation mark (`shard_evaluations`). Inside the caller's transaction. Only
-- rows of this shard: two shards' steps commit at once on the lake, and a sum of every shard's marks written
-- here would be a sum of what each saw; the hour's `evaluations` row and fold mark are written once, after
-- every shard, by the hour's `gpu_baselines_all_shards` (sql/shards/sum_evaluations.sql).
DELETE FROM findings WHERE partition_start = $start AND signal IN (SELECT signal FROM new_evaluations)
  AND shard_of(regexp_extract(entity_id, '^(.*):[0-9]+$', 1), $shards::VARCHAR[][]) = $shard;
INSERT INTO findings BY NAME
SELECT signal, entity_type, entity_id::VARCHAR AS entity_id, partition_start, onset, detected_at, last_seen,
       run_id, rank::INTEGER AS rank, hosts::VARCHAR[] AS hosts, gpus::VARCHAR[] AS gpus,
       value::DOUBLE AS value, baseline::DOUBLE AS baseline, threshold::DOUBLE AS threshold, evidence::JSON AS evidence,
       endpoint::VARCHAR AS endpoint, model_version::VARCHAR AS model_version,
       checkpoint::VARCHAR AS checkpoint, triage_class::VARCHAR AS triage_class
FROM new_findings;
DELETE FROM clearings WHERE partition_start = $start AND signal IN (SELECT signal FROM new_evaluations)
  AND shard_of(regexp_extract(entity_id, '^(.*):[0-9]+$', 1), $shards::VARCHAR[][]) = $shard;
INSERT INTO clearings BY NAME
SELECT signal, entity_type, entity_id::VARCHAR AS entity_id, partition_start, last_seen, cleared_at, evidence::JSON AS evidence
FROM new_clearings;
DELETE FROM judgements WHERE partition_start = $start AND signal IN (SELECT signal FROM new_evaluations)
  AND shard_of(regexp_extract(entity_id, '^(.*):[0-9]+$', 1), $shards::VARCHAR[][]) = $shard;
INSERT INTO judgements BY NAME SELECT * FROM new_judgements;
DELETE FROM shard_evaluations WHERE partition_start = $start AND shard = $shard_name
  AND signal IN (SELECT signal FROM new_evaluations);
INSERT INTO shard_evaluations BY NAME SELECT *, $shard_name AS shard FROM new_evaluations;
