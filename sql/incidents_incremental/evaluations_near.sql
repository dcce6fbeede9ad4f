-- The evaluation marks whose stretch reaches into one of the registered `ranges` (signal, lo, hi):
-- all a group's resolution reads (assets/incident_fold.py evaluated_spans, _clean_through). $lo/$hi: the
-- least lo and the greatest hi of the ranges.
SELECT DISTINCT e.signal, e.partition_start, e.evaluated_until
FROM evaluations e
JOIN ranges r ON r.signal = e.signal AND e.partition_start <= r.hi
 AND greatest(coalesce(e.evaluated_until, e.partition_start + INTERVAL 1 HOUR), e.partition_start + INTERVAL 1 HOUR) >= r.lo
-- the ranges' whole span first, the join's test in a form a scan filters fast: the join sees the few marks in it
WHERE e.partition_start <= $hi AND (e.partition_start >= $lo - INTERVAL 1 HOUR OR e.evaluated_until >= $lo)
ORDER BY e.signal, e.partition_start;
