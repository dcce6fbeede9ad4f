-- Replace one signal's findings, clearings and evaluation mark for one partition (inside the caller's transaction).
DELETE FROM findings WHERE signal = $signal AND partition_start = $start;
INSERT INTO findings BY NAME
SELECT signal, entity_type, entity_id::VARCHAR AS entity_id, partition_start, onset, detected_at, last_seen,
       run_id, rank::INTEGER AS rank, hosts::VARCHAR[] AS hosts, gpus::VARCHAR[] AS gpus,
       value::DOUBLE AS value, baseline::DOUBLE AS baseline, threshold::DOUBLE AS threshold, evidence::JSON AS evidence,
       endpoint::VARCHAR AS endpoint, model_version::VARCHAR AS model_version,
       checkpoint::VARCHAR AS checkpoint, triage_class::VARCHAR AS triage_class
FROM new_findings;
DELETE FROM clearings WHERE signal = $signal AND partition_start = $start;
INSERT INTO clearings BY NAME
SELECT signal, entity_type, entity_id::VARCHAR AS entity_id, partition_start, last_seen, cleared_at, evidence::JSON AS evidence
FROM new_clearings;
DELETE FROM evaluations WHERE signal = $signal AND partition_start = $start;
INSERT INTO evaluations BY NAME SELECT * FROM new_evaluations;
DELETE FROM judgements WHERE signal = $signal AND partition_start = $start;
INSERT INTO judgements BY NAME SELECT * FROM new_judgements;
-- Tell the incident fold this (signal, partition) was written (assets/incidents_incremental.py): one
-- mark however often it is written before the fold reads it (a run killed after its check steps, re-run).
DELETE FROM fold_marks WHERE signal = $signal AND partition_start = $start;
INSERT INTO fold_marks VALUES ($signal, $start);
