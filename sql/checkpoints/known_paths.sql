-- Every checkpoint path lineage has recorded (any time): a checkpoint found on disk that lineage
-- knows is audited in the hour lineage saved it, not by its files' modification time.
SELECT DISTINCT checkpoint_path FROM lineage_events
WHERE event = 'checkpoint_saved' AND checkpoint_path IS NOT NULL;
