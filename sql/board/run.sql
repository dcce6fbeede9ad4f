-- One run's lineage and progress (the runs view).
SELECT * FROM runs WHERE run_id = $run_id;
