-- The serialized incidents and transitions (before correlation and triage) of the registered `groups`.
SELECT s.signal, s.entity_type, s.entity_id, s.folded
FROM fold_state s
JOIN groups g ON g.signal = s.signal AND g.entity_type = s.entity_type AND g.entity_id = s.entity_id;
