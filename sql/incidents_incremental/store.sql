-- Update the incident tables and the fold's state by the rows that changed (inside the caller's
-- transaction): incidents `gone_ids` and their transitions deleted (incidents/insert.sql then inserts
-- `new_incidents` and `new_transitions`: same ids where they were only correlated or triaged again), the
-- per-incident index (`index_gone`, `new_index`; `recorrelated`: new correlation ids only), what the marked partitions hold now (`marked`, `new_seen`, `new_evaluations`), the
-- versions seen (`new_versions`), the settings digest, horizon and checkpoint lineage digest
-- (`new_meta`), and the marks read (`marked`).
DELETE FROM incidents WHERE incident_id IN (SELECT incident_id FROM gone_ids);
DELETE FROM incident_transitions WHERE incident_id IN (SELECT incident_id FROM gone_transitions);
DELETE FROM fold_incidents WHERE incident_id IN (SELECT incident_id FROM index_gone);
INSERT INTO fold_incidents BY NAME
SELECT incident_id, signal, entity_type, entity_id, pos::INTEGER AS pos, family, onset::TIMESTAMP AS onset,
       last_seen::TIMESTAMP AS last_seen, run_id::VARCHAR AS run_id, hosts::VARCHAR[] AS hosts, gpus::VARCHAR[] AS gpus,
       endpoint::VARCHAR AS endpoint, model_version::VARCHAR AS model_version, correlation_id::VARCHAR AS correlation_id,
       digest, episode::INTEGER AS episode, members::VARCHAR[] AS members, opened::TIMESTAMP AS opened,
       last_detected::TIMESTAMP AS last_detected, cleared_at::TIMESTAMP AS cleared_at, folded
FROM new_index;
UPDATE fold_incidents SET correlation_id = r.correlation_id FROM recorrelated r WHERE fold_incidents.incident_id = r.incident_id;
DELETE FROM fold_seen s WHERE EXISTS (SELECT 1 FROM marked m WHERE m.signal = s.signal AND m.partition_start = s.partition_start);
INSERT INTO fold_seen BY NAME
SELECT signal, partition_start, entity_type, entity_id, kind, digest::UBIGINT AS digest, n,
       first_at::TIMESTAMP AS first_at, last_at::TIMESTAMP AS last_at
FROM new_seen;
DELETE FROM fold_evaluations s WHERE EXISTS (SELECT 1 FROM marked m WHERE m.signal = s.signal AND m.partition_start = s.partition_start);
INSERT INTO fold_evaluations BY NAME SELECT signal, partition_start, evaluated_until::TIMESTAMP AS evaluated_until FROM new_evaluations;
DELETE FROM fold_versions;
INSERT INTO fold_versions BY NAME SELECT endpoint, model_version, digest::UBIGINT AS digest FROM new_versions;
DELETE FROM fold_meta;
INSERT INTO fold_meta BY NAME
SELECT config, horizon::TIMESTAMP AS horizon, checkpoints_digest::UBIGINT AS checkpoints_digest FROM new_meta;
DELETE FROM fold_marks m WHERE EXISTS (SELECT 1 FROM marked k WHERE k.signal = m.signal AND k.partition_start = m.partition_start);
