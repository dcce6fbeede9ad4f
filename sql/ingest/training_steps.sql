-- Replace one hour of training step records with the partition's good lines.
DELETE FROM training_steps WHERE time >= $start AND time < $end;
INSERT INTO training_steps BY NAME
SELECT unnest(rec), time, file AS source_file, line AS source_line
FROM parsed WHERE reason IS NULL;  -- already in file, line order (no sort: it cost ~1 s per 1.5 M rows)
