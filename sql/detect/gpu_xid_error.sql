-- XID events per GPU and minute of [$start, $end): the XID counter's increase over its previous
-- reading (looking back $lookback_minutes for it), the time of the first sample that showed it and
-- the XID it reported. A counter already non-zero before the window counts only when it rises; a
-- drop (driver reload, reboot) restarts the count, as Prometheus' increase() does.
-- From gpu_counter_minutes (the GPU baselines write it): a minute's increase is its first reading's rise
-- over the last reading before it, plus the rises between its own samples, so a tick reads a row per GPU
-- and minute, not every sample of the hour so far and the lookback.
WITH counters AS (
    SELECT host, gpu_index, minute, xid_first, xid_first_time, xid_first_last_xid, xid_rise, xid_rise_time,
           xid_rise_xid,
           last_value(xid_last IGNORE NULLS) OVER (
               PARTITION BY host, gpu_index ORDER BY minute
               ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS previous
    FROM gpu_counter_minutes
    WHERE minute >= $start - to_minutes(CAST($lookback_minutes AS INTEGER)) AND minute < $end
), minutes AS (
    SELECT *,
           counter_increase(xid_first, previous) AS first_rise
    FROM counters
    WHERE minute >= $start
)
SELECT g.host, g.gpu_index, g.gpu_uuid, g.minute,
       g.minute + INTERVAL 1 MINUTE AS tick, TRUE AS in_window,
       g.run_id, CAST(g.samples AS BIGINT) AS samples,
       CAST(c.first_rise + c.xid_rise AS HUGEINT) AS xid_increase,   -- HUGEINT: the type a sum over samples gave
       CASE WHEN c.first_rise > 0 THEN c.xid_first_time ELSE c.xid_rise_time END AS event_time,
       coalesce(c.xid_rise_xid, CASE WHEN c.first_rise > 0 THEN c.xid_first_last_xid END) AS event_xid,
       g.xid_errors_total
FROM minutes c
JOIN gpu_minutes g ON g.host = c.host AND g.gpu_index = c.gpu_index AND g.minute = c.minute
ORDER BY g.host, g.gpu_index, g.minute;
