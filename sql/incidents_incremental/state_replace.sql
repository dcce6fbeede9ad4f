-- Replace the state of the groups folded again (`refolded`) and drop those without findings
-- (`dropped`), inside the caller's transaction.
DELETE FROM fold_state s
WHERE EXISTS (SELECT 1 FROM dropped d WHERE d.signal = s.signal AND d.entity_type = s.entity_type AND d.entity_id = s.entity_id)
   OR EXISTS (SELECT 1 FROM refolded r WHERE r.signal = s.signal AND r.entity_type = s.entity_type AND r.entity_id = s.entity_id);
INSERT INTO fold_state BY NAME SELECT * FROM refolded;
