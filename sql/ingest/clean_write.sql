-- Replace one hour of a table from `clean` (sql/ingest/clean_read.sql), inside the caller's
-- transaction, with the same rows, source lines and ingest log the full parse would give. Any line
-- the full parse would quarantine (no time, a time outside the hour, a required field absent or
-- null, a producer's rejection, a value outside its physical range) stops the statement with error()
-- and the caller rolls back and parses the hour in full. /*@table*/, /*@fields*/, /*@required_present*/
-- and /*@in_range*/ are filled by assets/ingest.py from the table's schema (identifiers, never data;
-- integer fields arrive as DOUBLE and are cast only when whole: assets/ingest_ranges.py).
DELETE FROM /*@table*/ WHERE time >= $start AND time < $end;
INSERT INTO /*@table*/ BY NAME
SELECT /*@fields*/,
       CASE WHEN ts >= $start AND ts < $end AND quarantine_reason IS NULL /*@required_present*/ /*@in_range*/ THEN ts
            ELSE error('goodput-needs-full-parse') END AS time,
       c.filename AS source_file, (c.rowid - o.first_row + 1)::INTEGER AS source_line
FROM (SELECT *, rowid, TRY_CAST(time AS TIMESTAMPTZ) AT TIME ZONE 'UTC' AS ts FROM clean) c
JOIN file_lines o ON o.file = c.filename;
DELETE FROM quarantine WHERE source = $source AND partition_start = $start;
DELETE FROM ingest_files WHERE source = $source AND partition_start = $start;
INSERT INTO ingest_files
SELECT $source, $start, f.file, f.size_bytes, f.modified_ns, coalesce(o.lines, 0), 0
FROM file_stats f LEFT JOIN file_lines o ON o.file = f.file
ORDER BY f.file;
