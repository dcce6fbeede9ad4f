-- Add a tick's parsed lines (the temporary table `parsed`, sql/ingest/parse.sql) to one table and
-- the quarantine, inside the caller's transaction, as the whole-hour write would store them.
-- /*@table*/ and /*@payload*/ (the lineage table keeps each line as its payload) are filled by
-- assets/ingest_incremental.py.
INSERT INTO /*@table*/ BY NAME
SELECT unnest(rec), time, /*@payload*/ file AS source_file, line AS source_line
FROM parsed WHERE reason IS NULL;
INSERT INTO quarantine
SELECT $source, $start, file, line, raw, reason FROM parsed WHERE reason IS NOT NULL ORDER BY file, line;
