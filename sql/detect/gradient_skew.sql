-- Per rank and minute, from $lookback_minutes before the partition to $end (`in_window` marks the
-- partition's minutes): the rank's local grad norm and its usual ratio to its peers' median
-- (rank_minutes). The detector takes the peer median with the rank left out.
SELECT run_id, rank, run_id || '/rank-' || rank AS entity_id, host, gpu_index, minute,
       minute + INTERVAL 1 MINUTE AS tick,
       minute + INTERVAL 1 MINUTE > $start AS in_window,
       steps_completed, grad_norm, peer_grad_norm, grad_norm_ratio_baseline, baseline_minutes
FROM rank_minutes
WHERE minute >= $start - to_minutes(CAST($lookback_minutes AS INTEGER)) AND minute < $end
ORDER BY run_id, rank, minute;
