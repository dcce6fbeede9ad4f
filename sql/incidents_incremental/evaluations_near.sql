-- The evaluation marks whose stretch reaches into one of the registered `ranges` (signal, lo, hi):
-- all a group's resolution reads (assets/incident_fold.py evaluated_spans, _clean_through).
SELECT DISTINCT e.signal, e.partition_start, e.evaluated_until
FROM evaluations e
JOIN ranges r ON r.signal = e.signal AND e.partition_start <= r.hi
 AND greatest(coalesce(e.evaluated_until, e.partition_start + INTERVAL 1 HOUR), e.partition_start + INTERVAL 1 HOUR) >= r.lo
ORDER BY e.signal, e.partition_start;
