-- A digest of the incident transitions (count and a hash of their keys): the alert sensor reads
-- them all again only when it changed, or while a delivery is still waiting (its cursor).
SELECT count(*), coalesce(bit_xor(hash(incident_id, seq, transition, transition_at, tier)), 0)::VARCHAR
FROM incident_transitions;
