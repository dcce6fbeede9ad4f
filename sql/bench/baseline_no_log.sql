-- Generic "training job silent" alert: a job with no step record for $silence_minutes (NCCL's
-- default collective timeout is 10 minutes, so operators set the log-silence alert to match).
-- One row per silence: from a run's last step record (or its start) to its next one, its end
-- (`run_ended`), or the end of the data, whichever is first, when that is at least the silence.
-- It fires $silence_minutes after the last record. Per job, as operators write it: not per rank.
WITH runs AS (
    SELECT run_id,
           min(time) FILTER (WHERE event = 'run_started') AS started,
           min(time) FILTER (WHERE event = 'run_ended') AS ended
    FROM lineage_events
    WHERE run_id IS NOT NULL
    GROUP BY run_id
), marks AS (
    SELECT DISTINCT run_id, time FROM training_steps
    UNION
    SELECT run_id, started FROM runs WHERE started IS NOT NULL
), data_end AS (
    SELECT greatest((SELECT max(time) FROM gpu_samples), (SELECT max(time) FROM training_steps)) AS t
), silences AS (
    SELECT m.run_id, m.time AS last_record,
           least(coalesce(lead(m.time) OVER (PARTITION BY m.run_id ORDER BY m.time), r.ended, d.t),
                 coalesce(r.ended, d.t), d.t) AS next_record
    FROM marks m
    LEFT JOIN runs r USING (run_id)
    CROSS JOIN data_end d
    WHERE r.ended IS NULL OR m.time < r.ended
)
SELECT 'baseline_no_log_10m' AS signal, 'run' AS entity_type, run_id AS entity_id, run_id,
       last_record AS onset, last_record + to_minutes(CAST($silence_minutes AS INTEGER)) AS opened,
       next_record AS last_seen, CAST([] AS VARCHAR[]) AS gpus
FROM silences
WHERE next_record - last_record >= to_minutes(CAST($silence_minutes AS INTEGER))
ORDER BY run_id, onset;
