-- Generic "any XID" alert (increase(DCGM_FI_DEV_XID_ERRORS[5m]) > 0 style): one row per rise of a
-- GPU's XID counter over its previous reading. It fires at the first sample that shows the rise and
-- stays firing for $firing_minutes (the alert's look-back window). A counter that drops (a driver
-- reload) restarts, as Prometheus' increase() does.
WITH samples AS (
    SELECT host, gpu_index, time, run_id, xid_errors_total,
           last_value(xid_errors_total IGNORE NULLS) OVER (
               PARTITION BY host, gpu_index ORDER BY time
               ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS previous
    FROM gpu_samples
)
SELECT 'baseline_any_xid' AS signal, 'gpu' AS entity_type, host || ':' || gpu_index AS entity_id, run_id,
       time AS onset, time AS opened, time + to_minutes(CAST($firing_minutes AS INTEGER)) AS last_seen,
       [host || ':' || gpu_index] AS gpus
FROM samples
WHERE previous IS NOT NULL AND xid_errors_total IS NOT NULL AND xid_errors_total <> previous
ORDER BY entity_id, onset;
