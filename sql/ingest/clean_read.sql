-- The fast path for an hour whose raw lines are all good (the usual hour): DuckDB's own JSON reader
-- parses the files against the target table's fields ($shape: field -> type; `time` as text,
-- `quarantine_reason` as JSON), in file order then line order (preserve_insertion_order), so a
-- row's position in `clean` (its rowid) gives its file and line. The reader is strict: a line that is
-- not JSON, not an object, or holds a value its column's type cannot take fails the statement, and
-- assets/ingest.py then parses the hour with sql/ingest/parse.sql, which finds and quarantines it.
CREATE OR REPLACE TEMP TABLE clean AS
SELECT * FROM read_json($files::VARCHAR[], format = 'newline_delimited', records = true,
                        columns = $shape, filename = true);
