-- The fields a raw source's records may carry: the target table's columns, less time and provenance.
SELECT column_name, data_type
FROM information_schema.columns
WHERE table_catalog = current_database() AND table_name = $table   -- the warehouse's own (a process may attach others)
  AND column_name NOT IN ('time', 'payload', 'source_file', 'source_line')
ORDER BY ordinal_position;
