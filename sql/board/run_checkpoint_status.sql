-- One run's checkpoint status: its last checkpoint, the restart point that counts and what a restart costs.
SELECT * FROM checkpoint_status WHERE run_id = $run_id;
