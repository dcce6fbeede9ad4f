-- Replace one hour of one shard's GPU samples (its hosts' rows only) with the partition's good lines
-- (sql/shards/keep_lines.sql left only this shard's in `parsed`).
DELETE FROM gpu_samples WHERE time >= $start AND time < $end AND shard_of(host, $shards::VARCHAR[][]) = $shard;
INSERT INTO gpu_samples BY NAME
SELECT unnest(rec), time, file AS source_file, line AS source_line
FROM parsed WHERE reason IS NULL;
