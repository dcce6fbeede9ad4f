-- Refresh the ingest log (`ingest_files`) of the files a tick read: their size and modification
-- time now, and the rows they hold in the table and the quarantine (`touched`: file, size_bytes,
-- modified_ns). /*@table*/ is filled by assets/ingest_incremental.py.
DELETE FROM ingest_files
WHERE source = $source AND partition_start = $start AND file IN (SELECT file FROM touched);
INSERT INTO ingest_files
SELECT $source, $start, f.file, f.size_bytes, f.modified_ns,
       (SELECT count(*) FROM /*@table*/ t WHERE t.time >= $start AND t.time < $end AND t.source_file = f.file),
       (SELECT count(*) FROM quarantine q WHERE q.source = $source AND q.partition_start = $start AND q.file = f.file)
FROM touched f ORDER BY f.file;
