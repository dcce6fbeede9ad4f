-- The stored incidents (fold_incidents) of the correlation groups in the registered frame `cor_ids`.
SELECT i.* FROM fold_incidents i JOIN cor_ids c ON c.correlation_id = i.correlation_id;
