-- Incremental ingest (issue 15): how far each raw file of an hour has been read. A tick reads only
-- the bytes after `consumed_bytes` (always just past a newline: a last line without its newline is
-- read again with the bytes that complete it); `line_count` numbers the lines that follow;
-- `tail_digest` (sha1 of the up to 4 KiB before the offset) tells an append from a rewrite.
-- `file_key` is the path relative to the raw root (<source>/<day>/<HH>/<file>), so a moved home
-- keeps its offsets.
CREATE TABLE ingest_offsets (
    source                        VARCHAR   NOT NULL,
    partition_start               TIMESTAMP NOT NULL,
    file_key                      VARCHAR   NOT NULL,
    size_bytes                    BIGINT    NOT NULL,
    consumed_bytes                BIGINT    NOT NULL,
    line_count                    BIGINT    NOT NULL,
    tail_digest                   VARCHAR   NOT NULL,
    PRIMARY KEY (source, partition_start, file_key)
);
