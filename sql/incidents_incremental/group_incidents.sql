-- The stored incidents (fold_incidents) of the registered groups `dirty_groups`.
SELECT i.incident_id, i.signal, i.entity_type, i.entity_id, i.pos, i.family, i.onset, i.last_seen, i.run_id, i.hosts, i.gpus,
       i.endpoint, i.model_version, i.correlation_id, i.digest, i.episode, i.members, i.opened, i.last_detected, i.cleared_at
FROM fold_incidents i
JOIN dirty_groups d ON d.signal = i.signal AND d.entity_type = i.entity_type AND d.entity_id = i.entity_id;
