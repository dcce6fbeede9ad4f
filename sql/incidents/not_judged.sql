-- What the latest evaluated hour could not judge (`goodput incidents`): per entity type, the
-- entities seen, those no signal judged (and the commonest reason), and per (signal, reason) how
-- many entities that signal could not judge. One row per line to print; `kind` orders them.
WITH latest AS (SELECT max(partition_start) AS hour FROM judgements),
hour AS (SELECT j.* FROM judgements j, latest WHERE j.partition_start = latest.hour),
entities AS (
    SELECT entity_type, entity_id, NOT bool_or(judged) AS by_none, mode(reason) FILTER (WHERE NOT judged) AS reason
    FROM hour GROUP BY ALL
)
SELECT 0 AS kind, (SELECT hour FROM latest) AS hour, entity_type, NULL AS signal,
       count(*) AS seen, count(*) FILTER (WHERE by_none) AS not_judged,
       mode(reason) FILTER (WHERE by_none) AS reason
FROM entities GROUP BY ALL
UNION ALL
SELECT 1, (SELECT hour FROM latest), entity_type, signal, count(*), count(*) FILTER (WHERE NOT judged), reason
FROM hour WHERE NOT judged GROUP BY ALL
ORDER BY kind, not_judged DESC, entity_type, signal NULLS FIRST, reason;
