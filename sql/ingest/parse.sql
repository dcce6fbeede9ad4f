-- Parse one partition's raw lines (the registered frame `raw_lines`) against a source's fields.
-- $fields: JSON object field -> DuckDB type (from the target table); $text_fields: the same fields
-- as VARCHAR (what the line holds, typed or not); [$start, $end): the partition's hour. Every line
-- comes out once, with `reason` NULL if it is good and a sentence saying what is wrong if it goes
-- to the quarantine. The two /*@...*/ markers are filled by assets/ingest.py with one columnar
-- CASE per field of the target table (identifiers from the schema, never from the data).
CREATE OR REPLACE TEMP TABLE parsed AS
WITH lines AS (
    SELECT file::VARCHAR AS file, line::INTEGER AS line, raw::VARCHAR AS raw, complete::BOOLEAN AS complete, utf8::BOOLEAN AS utf8,
           CASE WHEN utf8 AND json_valid(raw) THEN json_type(raw) = 'OBJECT' ELSE false END AS is_object
    FROM raw_lines
), typed AS (
    SELECT *,
           CASE WHEN is_object THEN json_transform(raw, $fields) END AS rec,
           CASE WHEN is_object THEN json_transform(raw, $text_fields) END AS txt,
           CASE WHEN is_object THEN TRY_CAST(raw ->> 'time' AS TIMESTAMPTZ) AT TIME ZONE 'UTC' END AS ts
    FROM lines
), judged AS (
    SELECT *,
           CASE WHEN is_object THEN concat_ws(', ', /*@missing*/) END AS missing,
           CASE WHEN is_object THEN concat_ws(', ', /*@mistyped*/) END AS mistyped
    FROM typed
)
SELECT file, line, raw, rec, ts AS time,
       CASE
           WHEN NOT utf8 THEN 'not valid UTF-8'
           WHEN NOT complete AND NOT json_valid(raw) THEN 'truncated: last line has no newline and is not valid JSON'
           WHEN NOT json_valid(raw) THEN 'not valid JSON'
           WHEN NOT is_object THEN 'not a JSON object'
           -- A producer that parsed a foreign format (exposition text, logs) passes on what it rejected.
           WHEN json_type(raw, '$.quarantine_reason') = 'VARCHAR' THEN 'rejected by producer: ' || (raw ->> 'quarantine_reason')
           WHEN missing <> '' THEN 'missing required field(s): ' || missing
           WHEN mistyped <> '' THEN 'wrong type for field(s): ' || mistyped
           WHEN ts IS NULL THEN 'time is not an ISO-8601 timestamp'
           WHEN ts < $start OR ts >= $end THEN 'time ' || strftime(ts, '%Y-%m-%dT%H:%M:%S') || ' is outside the file''s hour bucket'
       END AS reason
FROM judged;
