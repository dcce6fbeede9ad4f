-- Generic "MFU too low" alert, as a dashboard on the MFU a trainer reports would have it: a run whose
-- model FLOPs utilization stays below a fixed $mfu_below for $mfu_for_minutes (minutes without steps
-- do not break the stretch; a gap of more than $max_gap_minutes in the series does). One row per
-- stretch, firing $mfu_for_minutes after its first minute. Per run, not against the run's own level.
WITH series AS (
    SELECT run_id, minute, mfu < $mfu_below AS firing
    FROM badput_minutes
    WHERE mfu IS NOT NULL AND steps_completed > 0
), marked AS (
    SELECT *,
           CASE WHEN firing AND (NOT coalesce(lag(firing) OVER w, false)
                                 OR minute - lag(minute) OVER w > to_minutes(CAST($max_gap_minutes AS INTEGER)))
                THEN 1 ELSE 0 END AS starts
    FROM series
    WINDOW w AS (PARTITION BY run_id ORDER BY minute)
), stretches AS (
    SELECT *, sum(starts) OVER (PARTITION BY run_id ORDER BY minute) AS stretch FROM marked
), held AS (
    SELECT run_id, stretch, min(minute) AS onset, max(minute) + INTERVAL 1 MINUTE AS last_seen
    FROM stretches WHERE firing GROUP BY ALL
)
SELECT 'baseline_mfu_low_10m' AS signal, 'run' AS entity_type, run_id AS entity_id, run_id,
       onset, onset + to_minutes(CAST($mfu_for_minutes AS INTEGER)) AS opened, last_seen,
       CAST([] AS VARCHAR[]) AS gpus
FROM held
WHERE last_seen - onset >= to_minutes(CAST($mfu_for_minutes AS INTEGER))
ORDER BY run_id, onset;
