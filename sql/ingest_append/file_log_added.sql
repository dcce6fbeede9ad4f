-- The ingest log (`ingest_files`) after a tick that forgot nothing (every file's last read ended
-- just past a newline, so no row stored earlier is read again): each touched file's counts grow by
-- what this tick parsed from it (`parsed`), without counting the hour's rows again, so the cost
-- follows the new lines. `touched`: file, size_bytes, modified_ns. file_log.sql counts instead.
UPDATE ingest_files
SET size_bytes = n.size_bytes, modified_ns = n.modified_ns,
    rows_loaded = ingest_files.rows_loaded + n.loaded, rows_quarantined = ingest_files.rows_quarantined + n.quarantined
FROM (SELECT f.file, f.size_bytes, f.modified_ns,
             count(p.file) FILTER (WHERE p.reason IS NULL) AS loaded,
             count(p.file) FILTER (WHERE p.reason IS NOT NULL) AS quarantined
      FROM touched f LEFT JOIN parsed p ON p.file = f.file GROUP BY ALL) n
WHERE ingest_files.source = $source AND ingest_files.partition_start = $start AND ingest_files.file = n.file;
INSERT INTO ingest_files
SELECT $source, $start, f.file, f.size_bytes, f.modified_ns,
       count(p.file) FILTER (WHERE p.reason IS NULL), count(p.file) FILTER (WHERE p.reason IS NOT NULL)
FROM touched f LEFT JOIN parsed p ON p.file = f.file
WHERE f.file NOT IN (SELECT file FROM ingest_files WHERE source = $source AND partition_start = $start)
GROUP BY f.file, f.size_bytes, f.modified_ns
ORDER BY f.file;
