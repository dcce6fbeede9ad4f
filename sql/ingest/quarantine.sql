-- Replace a partition's quarantined lines and ingest log for one source (inside the caller's transaction).
DELETE FROM quarantine WHERE source = $source AND partition_start = $start;
INSERT INTO quarantine
SELECT $source, $start, file, line, raw, reason FROM parsed WHERE reason IS NOT NULL ORDER BY file, line;
DELETE FROM ingest_files WHERE source = $source AND partition_start = $start;
INSERT INTO ingest_files
SELECT $source, $start, f.file, f.size_bytes, f.modified_ns,
       count(p.line) FILTER (WHERE p.reason IS NULL),
       count(p.line) FILTER (WHERE p.reason IS NOT NULL)
FROM file_stats f LEFT JOIN parsed p ON p.file = f.file
GROUP BY ALL ORDER BY f.file;
