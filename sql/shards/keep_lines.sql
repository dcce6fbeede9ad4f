-- A shard's ingest keeps only its hosts' lines of what it parsed (the temporary table `parsed`): the
-- others are another shard's to load or quarantine. A line without a readable host goes to the last
-- shard (`shard_of`), so a bad line is quarantined once.
DELETE FROM parsed WHERE shard_of(rec.host, $shards::VARCHAR[][]) <> $shard;
