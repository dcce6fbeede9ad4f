-- Replace the drift history of the hour [$start, $end) (inside the caller's transaction).
DELETE FROM drift_scores WHERE hour >= $start AND hour < $end;
INSERT INTO drift_scores BY NAME SELECT * FROM new_drift_scores;
