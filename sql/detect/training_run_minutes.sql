-- A run's per-minute training series with its trailing baselines (from `run_minutes`), for every
-- run with records in [$start, $end), plus $lookback_minutes of history before $start (rows with
-- `in_window` false: they feed the detectors' trailing windows and persistence but are not reported).
-- `tick` = minute + 1 minute, when the minute's evidence is complete. `hosts` / `gpus` name where
-- the run's ranks ran (from `rank_minutes`). Shared by the run-level training signals.
-- Across the ranks each minute (from `rank_minutes`): `imbalance_seconds`, how much longer the slowest
-- rank works (compute; without the breakdown, its step less its data time) than the typical one (the
-- lower median, so that of two ranks the faster is the typical one), the time its peers wait for a
-- straggler; `collective_floor_seconds`, the shortest collective of any rank, the transfer itself (the
-- slowest rank waits for no one).
WITH runs AS (
    SELECT DISTINCT run_id FROM run_minutes WHERE minute >= $start AND minute < $end
), first_seen AS (   -- each run's first minute: warm-up is judged by the run's age
    SELECT run_id, first_minute FROM run_starts SEMI JOIN runs USING (run_id)
), placement AS (
    SELECT run_id,
           list(DISTINCT host ORDER BY host) FILTER (WHERE host IS NOT NULL) AS hosts,
           list(DISTINCT host || ':' || gpu_index ORDER BY host || ':' || gpu_index)
               FILTER (WHERE host IS NOT NULL AND gpu_index IS NOT NULL) AS gpus
    FROM rank_minutes SEMI JOIN runs USING (run_id)
    WHERE minute >= $start AND minute < $end
    GROUP BY run_id
), spread AS (
    SELECT run_id, minute,
           max(work) - quantile_disc(work, 0.5) AS imbalance_seconds,
           min(collective_seconds) AS collective_floor_seconds
    FROM (SELECT run_id, minute, coalesce(compute_seconds, step_seconds - coalesce(data_seconds, 0)) AS work,
                 collective_seconds
          FROM rank_minutes SEMI JOIN runs USING (run_id)
          WHERE minute >= $start - to_seconds(60 * $lookback_minutes) AND minute < $end)
    GROUP BY run_id, minute
)
SELECT m.run_id, m.minute,
       m.minute + INTERVAL 1 MINUTE AS tick, m.minute >= $start AS in_window,
       m.world_size, m.ranks_reporting, m.steps_completed, m.last_step,
       m.loss, m.loss_min, m.loss_max, m.nonfinite_losses, m.nan_iterations_total, m.skipped_iterations_total,
       m.grad_norm, m.grad_norm_max, m.loss_scale, m.learning_rate,
       m.tokens_per_second, m.step_seconds, m.step_seconds_max, m.data_seconds, m.compute_seconds, m.collective_seconds,
       m.step_seconds_baseline, m.step_seconds_mad, m.pace_seconds, m.pace_seconds_baseline, m.pace_seconds_mad, m.tokens_per_second_baseline, m.tokens_per_second_mad,
       m.loss_baseline, m.loss_mad, m.grad_norm_baseline, m.grad_norm_mad,
       m.collective_seconds_baseline, m.collective_seconds_mad,
       m.baseline_window_minutes, m.baseline_minutes,
       s.first_minute, sp.imbalance_seconds, sp.collective_floor_seconds,
       coalesce(p.hosts, []) AS hosts, coalesce(p.gpus, []) AS gpus
FROM run_minutes m SEMI JOIN runs USING (run_id)
LEFT JOIN placement p USING (run_id)
LEFT JOIN first_seen s USING (run_id)
LEFT JOIN spread sp USING (run_id, minute)
WHERE m.minute >= $start - to_seconds(60 * $lookback_minutes) AND m.minute < $end
ORDER BY m.run_id, m.minute;
