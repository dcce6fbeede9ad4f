-- XID events per GPU and minute of [$start, $end): the XID counter's increase over its previous
-- reading (looking back $lookback_minutes for it), the time of the first sample that showed it and
-- the XID it reported. A counter already non-zero before the window counts only when it rises; a
-- drop (driver reload, reboot) restarts the count, as Prometheus' increase() does.
-- The lookback is read once, as each GPU's last reading before the window (`seed`, one row just
-- before $start), not as samples the window function walks: the cost of a tick follows the hour so
-- far, and the previous readings are the same.
WITH seed AS (
    SELECT host, gpu_index, CAST($start AS TIMESTAMP) - INTERVAL 1 MICROSECOND AS time,
           arg_max(xid_errors_total, time) FILTER (WHERE xid_errors_total IS NOT NULL) AS xid_errors_total
    FROM gpu_samples
    WHERE time >= $start - to_minutes(CAST($lookback_minutes AS INTEGER)) AND time < $start
    GROUP BY host, gpu_index
), samples AS (
    SELECT host, gpu_index, gpu_uuid, time, run_id, xid_errors_total, last_xid,
           last_value(xid_errors_total IGNORE NULLS) OVER (
               PARTITION BY host, gpu_index ORDER BY time
               ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS previous
    FROM (SELECT host, gpu_index, gpu_uuid, time, run_id, xid_errors_total, last_xid
          FROM gpu_samples WHERE time >= $start AND time < $end
          UNION ALL BY NAME SELECT * FROM seed)
), events AS (
    SELECT *,
           CASE WHEN xid_errors_total IS NULL OR previous IS NULL THEN 0
                WHEN xid_errors_total >= previous THEN xid_errors_total - previous
                ELSE xid_errors_total END AS increase
    FROM samples
)
SELECT host, gpu_index, any_value(gpu_uuid) AS gpu_uuid,
       time_bucket(INTERVAL 1 MINUTE, time) AS minute,
       time_bucket(INTERVAL 1 MINUTE, time) + INTERVAL 1 MINUTE AS tick, TRUE AS in_window,
       mode(run_id) AS run_id,
       count(*) AS samples,
       sum(increase) AS xid_increase,
       min(time) FILTER (WHERE increase > 0) AS event_time,
       arg_max(last_xid, time) FILTER (WHERE increase > 0) AS event_xid,
       max(xid_errors_total) AS xid_errors_total
FROM events
WHERE time >= $start
GROUP BY host, gpu_index, time_bucket(INTERVAL 1 MINUTE, time)
ORDER BY host, gpu_index, minute;
