-- The stored incidents (fold_incidents) of the correlation groups in the registered frame `cor_ids`.
SELECT i.incident_id, i.signal, i.entity_type, i.entity_id, i.pos, i.family, i.onset, i.last_seen, i.run_id, i.hosts, i.gpus,
       i.endpoint, i.model_version, i.correlation_id, i.digest, i.episode, i.members, i.opened, i.last_detected, i.cleared_at FROM fold_incidents i JOIN cor_ids c ON c.correlation_id = i.correlation_id;
