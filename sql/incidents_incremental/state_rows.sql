-- The serialized incidents and transitions of the groups the fold keeps as they were (`kept`).
SELECT s.signal, s.entity_type, s.entity_id, s.folded
FROM fold_state s JOIN kept k USING (signal, entity_type, entity_id);
