-- The lake's latest committed snapshot: the board's data version in lake mode (every write commits one).
SELECT id FROM lake.current_snapshot();
