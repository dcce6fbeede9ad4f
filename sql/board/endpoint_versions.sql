-- One endpoint's version stints: served from/until, promoted when, from which run and checkpoint.
SELECT model_version, served_from, served_until, promoted_at, previous_version, run_id, checkpoint_step,
       checkpoint_path, registered_at
FROM serving_versions
WHERE endpoint = $endpoint
ORDER BY served_from;
