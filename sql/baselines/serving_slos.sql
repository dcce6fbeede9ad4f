-- Replace the per-endpoint SLOs with the ones configured now (`new_slos`, from thresholds.yaml).
DELETE FROM serving_slos;
INSERT INTO serving_slos BY NAME SELECT * FROM new_slos;
