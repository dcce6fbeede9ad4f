-- unjudged_entities: the entity-hours no signal could judge, newest first, with the reasons.
CREATE OR REPLACE VIEW unjudged_entities AS
SELECT hour, entity_type, entity_id, minutes_present, signals, not_judged_reasons
FROM judged_entities
WHERE judged_by_none
ORDER BY hour DESC, entity_type, entity_id;
