-- One row per (signal, incident entity) group of findings, as the fold groups them (a rank's
-- findings belong to their run: assets/incidents.py incident_entity), with a digest of every
-- column the fold reads (sql/incidents/findings.sql, filled in at the findings marker) and the count.
WITH f AS (/*@findings*/)
SELECT signal,
       CASE WHEN entity_type = 'rank' AND run_id IS NOT NULL AND run_id <> '' THEN 'run' ELSE entity_type END AS group_type,
       CASE WHEN entity_type = 'rank' AND run_id IS NOT NULL AND run_id <> '' THEN run_id ELSE entity_id END AS group_id,
       bit_xor(hash(f)) AS digest, count(*) AS n
FROM f
GROUP BY ALL;
