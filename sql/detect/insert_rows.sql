-- A check step's new findings, clearings and judgements (the registered frames new_findings, new_clearings,
-- new_judgements) inserted with the tables' types, after sql/detect/store_findings.sql or
-- sql/shards/store_findings.sql cleared what they replace. Inside the caller's transaction.
INSERT INTO findings BY NAME
SELECT signal, entity_type, entity_id::VARCHAR AS entity_id, partition_start, onset, detected_at, last_seen,
       run_id, rank::INTEGER AS rank, hosts::VARCHAR[] AS hosts, gpus::VARCHAR[] AS gpus,
       value::DOUBLE AS value, baseline::DOUBLE AS baseline, threshold::DOUBLE AS threshold, evidence::JSON AS evidence,
       endpoint::VARCHAR AS endpoint, model_version::VARCHAR AS model_version,
       checkpoint::VARCHAR AS checkpoint, triage_class::VARCHAR AS triage_class
FROM new_findings;
INSERT INTO clearings BY NAME
SELECT signal, entity_type, entity_id::VARCHAR AS entity_id, partition_start, last_seen, cleared_at, evidence::JSON AS evidence
FROM new_clearings;
INSERT INTO judgements BY NAME SELECT * FROM new_judgements;
