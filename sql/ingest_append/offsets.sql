-- How far each file of one hour of one source has been read, and whether the ingest log saw it
-- (a file the log saw that has no offset means the hour was read another way: read it whole).
SELECT coalesce(o.file_key, f.file_key) AS file_key, o.size_bytes, o.consumed_bytes, o.line_count, o.tail_digest,
       f.file IS NOT NULL AS logged, f.modified_ns AS logged_modified_ns
FROM (SELECT * FROM ingest_offsets WHERE source = $source AND partition_start = $start) o
FULL OUTER JOIN (
    SELECT file, modified_ns, array_to_string(string_split(replace(file, '\', '/'), '/')[-4:], '/') AS file_key
    FROM ingest_files WHERE source = $source AND partition_start = $start
) f ON f.file_key = o.file_key;
