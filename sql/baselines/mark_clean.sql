-- The partition's series were just computed from every row there is, with `$window_minutes`.
DELETE FROM baseline_dirty WHERE source = $source AND partition_start = $start;
INSERT INTO baseline_dirty VALUES ($source, $start, NULL, $window_minutes);
