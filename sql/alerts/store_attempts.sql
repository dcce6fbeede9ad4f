-- Mirror journaled delivery attempts into the warehouse; an attempt already there is not added again.
INSERT INTO alert_attempts BY NAME
SELECT n.attempt_id, n.sink, n.dedup_key, n.incident_id, n.transition, n.attempt::INTEGER AS attempt,
       n.attempted_at::TIMESTAMP AS attempted_at, n.outcome, n.status_code::INTEGER AS status_code,
       n.error::VARCHAR AS error, n.elapsed_seconds::DOUBLE AS elapsed_seconds
FROM new_attempts n
WHERE n.attempt_id NOT IN (SELECT attempt_id FROM alert_attempts)
ORDER BY n.attempted_at, n.attempt_id;
