-- Parse one partition's raw lines against a source's fields. DuckDB reads and splits the files
-- itself (read_text($files), parallel over files; a Python split of every line cost more than the
-- parse); a file that is not valid UTF-8 (read_text refuses it) is left out of $files and read
-- line by line in Python instead, as the registered frame `raw_lines`, so its bad lines reach the
-- quarantine with their line numbers and its good lines still land.
-- $shape: JSON object field -> DuckDB type: the target table's fields, plus `time` as text and
-- `quarantine_reason` as JSON; [$start, $end): the partition's hour; $keep_raw: keep every good
-- line's text (for a table that stores it, e.g. lineage payloads; quarantined lines always keep it).
-- Every non-blank line comes out once, with `reason` NULL if it is good and a sentence saying what
-- is wrong if it goes to the quarantine. The /*@...*/ markers are filled by assets/ingest.py with
-- one columnar expression per field of the target table (identifiers from the schema, never data).
--
-- Speed: a good line is parsed once (one typed json_transform that also yields its time and any
-- producer's rejection). Only what that parse leaves in doubt is looked at again, per row and per
-- field: a line that did not parse (invalid JSON, or a JSON `null`?), one without a time or a
-- required field (is it an object at all?), and a field that came out NULL (absent, JSON null, or
-- present with a value the column's type cannot hold: "wrong type").
CREATE OR REPLACE TEMP TABLE parsed AS
WITH files AS (
    SELECT filename AS file, string_split(content, chr(10)) AS parts FROM read_text($files::VARCHAR[])
), numbered AS (
    SELECT file, unnest(parts) AS raw, unnest(generate_series(1, len(parts))) AS line, len(parts) AS n FROM files
), lines AS (
    -- A last line without its newline (a writer mid-append, a truncated file) is not complete.
    -- Blank lines (only ASCII whitespace, as Python's bytes.strip) are skipped, not quarantined.
    SELECT file::VARCHAR AS file, line::INTEGER AS line, raw, line < n AS complete, true AS utf8
    FROM numbered
    WHERE regexp_matches(raw, '[^ \t\n\r\x0b\x0c]')
    UNION ALL
    SELECT file::VARCHAR, line::INTEGER, raw::VARCHAR, complete::BOOLEAN, utf8::BOOLEAN FROM raw_lines
), transformed AS (
    -- try(): a line that is not valid JSON comes out NULL instead of failing the whole statement.
    SELECT *, CASE WHEN utf8 THEN try(json_transform(raw, $shape)) END AS j FROM lines
), typed AS (
    SELECT *, TRY_CAST(j.time AS TIMESTAMPTZ) AT TIME ZONE 'UTC' AS ts FROM transformed
), checked AS (
    SELECT *,
           CASE WHEN j IS NULL THEN utf8 AND json_valid(raw) ELSE true END AS valid,
           -- A JSON array or scalar transforms to all-NULL fields, so a line with its time and
           -- required fields is an object; only the others are asked.
           CASE WHEN j IS NULL THEN false
                WHEN ts IS NULL /*@required_null*/ THEN json_type(raw) = 'OBJECT'
                ELSE true END AS is_object
    FROM typed
), judged AS (
    SELECT *,
           CASE WHEN is_object THEN concat_ws(', ', /*@missing*/) END AS missing,
           CASE WHEN is_object THEN concat_ws(', ', /*@mistyped*/) END AS mistyped,
           -- values their column's type takes but physics does not (assets/ingest_ranges.py)
           CASE WHEN is_object THEN /*@out_of_range*/ END AS out_of_range
    FROM checked
), reasoned AS (
    SELECT file, line, raw, struct_pack(/*@fields*/) AS rec, ts AS time,
           CASE
               WHEN NOT utf8 THEN 'not valid UTF-8'
               WHEN NOT complete AND NOT valid THEN 'truncated: last line has no newline and is not valid JSON'
               WHEN NOT valid THEN 'not valid JSON'
               WHEN NOT is_object THEN 'not a JSON object'
               -- A producer that parsed a foreign format (exposition text, logs) passes on what it rejected.
               WHEN j.quarantine_reason IS NOT NULL AND json_type(j.quarantine_reason) = 'VARCHAR'
                   THEN 'rejected by producer: ' || (j.quarantine_reason ->> '$')
               WHEN missing <> '' THEN 'missing required field(s): ' || missing
               WHEN mistyped <> '' THEN 'wrong type for field(s): ' || mistyped
               WHEN out_of_range <> '' THEN 'value(s) outside their physical range: ' || out_of_range
               WHEN ts IS NULL THEN 'time is not an ISO-8601 timestamp'
               WHEN ts < $start OR ts >= $end THEN 'time ' || strftime(ts, '%Y-%m-%dT%H:%M:%S') || ' is outside the file''s hour bucket'
           END AS reason
    FROM judged
)
SELECT file, line, CASE WHEN $keep_raw OR reason IS NOT NULL THEN raw END AS raw, rec, time, reason
FROM reasoned;
