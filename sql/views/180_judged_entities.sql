-- judged_entities: per entity and hour, what the signals that see it could judge (table
-- `judgements`, written by every check evaluation): how many signals saw it, how many judged it,
-- the minutes it was present and the most minutes any signal judged, and why the others could not
-- (`not_judged_reasons`: "signal: reason"). `judged_by_none`: no signal could judge the entity in
-- that hour, so silence about it is NOT health (too little history, a missing field).
CREATE OR REPLACE VIEW judged_entities AS
SELECT partition_start AS hour,
       entity_type,
       entity_id,
       count(*)                                            AS signals,
       count(*) FILTER (WHERE judged)                      AS signals_judged,
       max(minutes)                                        AS minutes_present,
       max(judged_minutes)                                 AS minutes_judged,
       NOT bool_or(judged)                                 AS judged_by_none,
       list(signal || ': ' || reason ORDER BY signal) FILTER (WHERE NOT judged) AS not_judged_reasons
FROM judgements
GROUP BY ALL;
