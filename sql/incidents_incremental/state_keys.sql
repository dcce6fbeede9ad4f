-- What the last incremental fold kept per group (without the serialized rows).
SELECT signal, entity_type, entity_id, digest, findings, resolution, config FROM fold_state;
