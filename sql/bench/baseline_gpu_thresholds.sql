-- Generic GPU threshold alerts, the ones dashboards ship (DCGM exporter / Grafana style rules with a
-- `for:` duration): one row per stretch in which a rule's condition held on a GPU for at least its
-- duration. A stretch is a run of consecutive samples meeting the condition; a gap in the samples
-- longer than $max_gap_seconds, or a sample that does not meet it, ends the stretch. A null reading
-- (a GPU that fell off the bus) does not meet any condition, as in PromQL.
--   baseline_util_low_10m  utilization < $util_below on a GPU held by a run, for $util_for_minutes
--   baseline_util_low_any_10m  the same on any GPU, as GPU dashboards ship it (idle GPUs included)
--   baseline_memory_95     memory used > $memory_above of the card, for $memory_for_minutes
--   baseline_temp_85       temperature > $temp_above °C, for $temp_for_minutes
WITH samples AS (
    SELECT host, gpu_index, time, run_id,
           coalesce(utilization_ratio < $util_below AND run_id IS NOT NULL, false) AS baseline_util_low_10m,
           coalesce(utilization_ratio < $util_below, false) AS baseline_util_low_any_10m,
           coalesce(memory_used_bytes > $memory_above * memory_total_bytes, false) AS baseline_memory_95,
           coalesce(temperature_celsius > $temp_above, false) AS baseline_temp_85
    FROM gpu_samples
), per_rule AS (
    UNPIVOT samples ON baseline_util_low_10m, baseline_util_low_any_10m, baseline_memory_95, baseline_temp_85
    INTO NAME signal VALUE firing
), marked AS (
    SELECT *,
           CASE WHEN firing AND (NOT coalesce(lag(firing) OVER w, false)
                                 OR time - lag(time) OVER w > to_seconds(CAST($max_gap_seconds AS DOUBLE)))
                THEN 1 ELSE 0 END AS starts
    FROM per_rule
    WINDOW w AS (PARTITION BY signal, host, gpu_index ORDER BY time)
), stretches AS (
    SELECT *, sum(starts) OVER (PARTITION BY signal, host, gpu_index ORDER BY time) AS stretch
    FROM marked
), held AS (
    SELECT signal, host, gpu_index, stretch,
           min(time) AS onset, max(time) AS last_seen, mode(run_id) AS run_id,
           CASE WHEN signal LIKE 'baseline_util_low%' THEN $util_for_minutes
                WHEN signal = 'baseline_memory_95' THEN $memory_for_minutes
                ELSE $temp_for_minutes END AS for_minutes
    FROM stretches
    WHERE firing
    GROUP BY signal, host, gpu_index, stretch
)
SELECT signal, 'gpu' AS entity_type, host || ':' || gpu_index AS entity_id, run_id,
       onset, onset + to_minutes(CAST(for_minutes AS INTEGER)) AS opened, last_seen,
       [host || ':' || gpu_index] AS gpus
FROM held
WHERE last_seen - onset >= to_minutes(CAST(for_minutes AS INTEGER))
ORDER BY signal, entity_id, onset;
