-- Replace the findings, clearings, evaluation marks and judgements of one partition for every signal in
-- new_evaluations (one row per signal evaluated), inside the caller's transaction: a check step stores its
-- signals together (checks/asset_checks.py).
DELETE FROM findings WHERE partition_start = $start AND signal IN (SELECT signal FROM new_evaluations);
INSERT INTO findings BY NAME
SELECT signal, entity_type, entity_id::VARCHAR AS entity_id, partition_start, onset, detected_at, last_seen,
       run_id, rank::INTEGER AS rank, hosts::VARCHAR[] AS hosts, gpus::VARCHAR[] AS gpus,
       value::DOUBLE AS value, baseline::DOUBLE AS baseline, threshold::DOUBLE AS threshold, evidence::JSON AS evidence,
       endpoint::VARCHAR AS endpoint, model_version::VARCHAR AS model_version,
       checkpoint::VARCHAR AS checkpoint, triage_class::VARCHAR AS triage_class
FROM new_findings;
DELETE FROM clearings WHERE partition_start = $start AND signal IN (SELECT signal FROM new_evaluations);
INSERT INTO clearings BY NAME
SELECT signal, entity_type, entity_id::VARCHAR AS entity_id, partition_start, last_seen, cleared_at, evidence::JSON AS evidence
FROM new_clearings;
DELETE FROM evaluations WHERE partition_start = $start AND signal IN (SELECT signal FROM new_evaluations);
INSERT INTO evaluations BY NAME SELECT * FROM new_evaluations;
DELETE FROM judgements WHERE partition_start = $start AND signal IN (SELECT signal FROM new_evaluations);
INSERT INTO judgements BY NAME SELECT * FROM new_judgements;
-- Tell the incident fold these (signal, partition)s were written (assets/incidents_incremental.py): one
-- mark however often they are written before the fold reads them (a run killed after its check steps, re-run).
DELETE FROM fold_marks WHERE partition_start = $start AND signal IN (SELECT signal FROM new_evaluations);
INSERT INTO fold_marks SELECT DISTINCT signal, $start FROM new_evaluations;
