-- Every run, newest first, with its open incidents (for the Now page's list of runs).
SELECT r.run_id, r.team, r.job, r.gpus, r.started, r.ended, r.end_status, r.last_step, r.last_step_at, r.restarts,
       (SELECT count(*) FROM incidents i WHERE i.run_id = r.run_id AND i.status = 'open') AS open_incidents
FROM runs r
ORDER BY open_incidents DESC, r.started DESC NULLS LAST, r.run_id;
