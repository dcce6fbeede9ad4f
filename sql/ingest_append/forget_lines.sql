-- Remove what an earlier tick stored from the lines a tick reads again ($start/$end: the hour;
-- `appended` (file, first_line): each file's first line read this tick, which may be a last line
-- stored without its newline), from the table and the quarantine. /*@table*/ is filled by
-- assets/ingest_incremental.py (an identifier, never data).
DELETE FROM /*@table*/ t
WHERE t.time >= $start AND t.time < $end
  AND EXISTS (SELECT 1 FROM appended a WHERE a.file = t.source_file AND t.source_line >= a.first_line);
DELETE FROM quarantine q
WHERE q.source = $source AND q.partition_start = $start
  AND EXISTS (SELECT 1 FROM appended a WHERE a.file = q.file AND q.line >= a.first_line);
