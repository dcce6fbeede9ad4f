-- Store how far each file of one hour of one source has been read (`offsets` frame), replacing
-- the hour's previous offsets when `$whole` (the hour was just replaced), else only those files'.
DELETE FROM ingest_offsets
WHERE source = $source AND partition_start = $start
  AND ($whole OR file_key IN (SELECT file_key FROM offsets));
INSERT INTO ingest_offsets
SELECT $source, $start, file_key, size_bytes, consumed_bytes, line_count, tail_digest FROM offsets ORDER BY file_key;
