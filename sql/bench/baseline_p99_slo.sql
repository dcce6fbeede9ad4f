-- Generic serving latency alert: an endpoint's p99 time to first token above $slo_seconds for
-- $for_minutes (consecutive readings; a gap over $max_gap_seconds ends the stretch). Empty when
-- there are no serving metrics.
WITH marked AS (
    SELECT endpoint, model_version, time,
           coalesce(ttft_p99_seconds > $slo_seconds, false) AS firing,
           lag(coalesce(ttft_p99_seconds > $slo_seconds, false)) OVER w AS previous_firing,
           time - lag(time) OVER w AS gap
    FROM serving_metrics
    WINDOW w AS (PARTITION BY endpoint ORDER BY time)
), stretches AS (
    SELECT *, sum(CASE WHEN firing AND (NOT coalesce(previous_firing, false)
                                        OR gap > to_seconds(CAST($max_gap_seconds AS DOUBLE)))
                       THEN 1 ELSE 0 END) OVER (PARTITION BY endpoint ORDER BY time) AS stretch
    FROM marked
), held AS (
    SELECT endpoint, stretch, min(time) AS onset, max(time) AS last_seen
    FROM stretches WHERE firing GROUP BY endpoint, stretch
)
SELECT 'baseline_p99_slo' AS signal, 'endpoint' AS entity_type, endpoint AS entity_id,
       CAST(NULL AS VARCHAR) AS run_id, onset,
       onset + to_minutes(CAST($for_minutes AS INTEGER)) AS opened, last_seen, CAST([] AS VARCHAR[]) AS gpus
FROM held
WHERE last_seen - onset >= to_minutes(CAST($for_minutes AS INTEGER))
ORDER BY entity_id, onset;
