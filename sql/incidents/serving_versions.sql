-- Every endpoint's version history with its lineage (the serving_versions view), for the triage of
-- serving and quality incidents in the fold.
SELECT endpoint, model_version, served_from, served_until, promoted_at, previous_version,
       run_id, checkpoint_step, checkpoint_path, registered_at
FROM serving_versions
ORDER BY endpoint, served_from, model_version;
