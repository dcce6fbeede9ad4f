-- The incidents of one run, as windows to shade on its plots.
SELECT incident_id, signal, tier, status, title, onset, opened, last_seen, resolved, gpu_hours_at_risk, owner,
       onset AS window_start, last_seen AS window_end
FROM incidents
WHERE run_id = $run_id
ORDER BY onset;
