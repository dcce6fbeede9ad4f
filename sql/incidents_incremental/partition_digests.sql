-- Per (signal, partition, incident group) of the partitions in the registered frame `marked`: a
-- digest of the findings the check wrote (every column) and their count. A rank's findings belong
-- to their run's group; first_at/last_at: the first and last detected_at (assets/incident_fold.py incident_entity). $lo/$hi bound the partitions read.
SELECT f.signal, f.partition_start,
       CASE WHEN f.entity_type = 'rank' AND f.run_id IS NOT NULL AND f.run_id <> '' THEN 'run' ELSE f.entity_type END AS entity_type,
       CASE WHEN f.entity_type = 'rank' AND f.run_id IS NOT NULL AND f.run_id <> '' THEN f.run_id ELSE f.entity_id END AS entity_id,
       'f' AS kind, bit_xor(hash(f)) AS digest, count(*) AS n,
       min(f.detected_at) AS first_at, max(f.detected_at) AS last_at
FROM findings f
JOIN marked m ON m.signal = f.signal AND m.partition_start = f.partition_start
WHERE f.partition_start BETWEEN $lo AND $hi
GROUP BY ALL;
