-- Replace one hour of predictions with the partition's good lines.
DELETE FROM predictions WHERE time >= $start AND time < $end;
INSERT INTO predictions BY NAME
SELECT unnest(rec), time, file AS source_file, line AS source_line
FROM parsed WHERE reason IS NULL ORDER BY file, line;
