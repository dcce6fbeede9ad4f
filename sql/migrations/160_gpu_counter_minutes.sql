-- The GPU hardware counters per GPU and minute, in parts that need no reading from outside the minute: each
-- counter's first and last reading in the minute, and what it rose by between the minute's own samples
-- (issue 15: gpu_xid_error, gpu_xid_fatal and gpu_ecc_error walked a window function over every GPU sample of
-- the hour so far and their lookback at every tick). A check adds the rise of the minute's first reading over
-- the last reading before it (sql/detect/gpu_xid_error.sql, gpu_ecc_error.sql). The GPU baselines write it
-- beside gpu_minutes, from the first minute ingest marked dirty (sql/baselines/gpu_counter_minutes.sql);
-- retention keeps it as long as gpu_minutes (sql/maintenance/delete_minutes.sql).
-- A rise is the counter's increase over its previous reading; a drop (a driver reload) restarts the count, as
-- Prometheus' increase() does. `*_rise_time`: the first sample that rose over a reading of the same minute.
CREATE TABLE gpu_counter_minutes (
    host                          VARCHAR   NOT NULL,
    gpu_index                     INTEGER   NOT NULL,
    minute                        TIMESTAMP NOT NULL,
    xid_first                     BIGINT,      -- xid_errors_total
    xid_first_time                TIMESTAMP,
    xid_first_last_xid            INTEGER,     -- the last XID the first reading's sample reported
    xid_last                      BIGINT,
    xid_rise                      BIGINT,
    xid_rise_time                 TIMESTAMP,
    xid_rise_xid                  INTEGER,     -- the last XID reported by the latest sample that rose
    uncorrected_first             BIGINT,      -- ecc_uncorrected_errors_total
    uncorrected_first_time        TIMESTAMP,
    uncorrected_last              BIGINT,
    uncorrected_rise              BIGINT,
    uncorrected_rise_time         TIMESTAMP,
    corrected_first               BIGINT,      -- ecc_corrected_errors_total
    corrected_last                BIGINT,
    corrected_rise                BIGINT,
    remapped_first                BIGINT,      -- remapped_rows_uncorrectable_total
    remapped_first_time           TIMESTAMP,
    remapped_last                 BIGINT,
    remapped_rise                 BIGINT,
    remapped_rise_time            TIMESTAMP,
    pending_first                 BOOLEAN,     -- row_remap_pending
    pending_first_time            TIMESTAMP,
    pending_last                  BOOLEAN,
    pending_rise_time             TIMESTAMP    -- turned pending after a reading of the same minute that was not
);   -- no primary key, as gpu_minutes has none: its index doubled the cost of writing a tick's rows

-- A counter's increase at a reading over the previous one: 0 without both; a drop (a driver reload, a reboot)
-- restarts the count, as Prometheus' increase() does.
CREATE MACRO counter_increase(reading, previous) AS
    CASE WHEN reading IS NULL OR previous IS NULL THEN 0
         WHEN reading >= previous THEN reading - previous
         ELSE reading END;

-- The rows of gpu_counter_minutes for the GPU samples in [from_time, end_time), whole minutes: each minute's
-- parts read only that minute's samples (sql/baselines/gpu_counter_minutes.sql writes them; so does this
-- migration, once, for the samples a home holds).
CREATE MACRO gpu_counter_parts(from_time, end_time) AS TABLE
WITH samples AS (
    SELECT host, gpu_index, time, time_bucket(INTERVAL 1 MINUTE, time) AS minute, last_xid,
           xid_errors_total AS xid, ecc_uncorrected_errors_total AS uncorrected,
           ecc_corrected_errors_total AS corrected, remapped_rows_uncorrectable_total AS remapped,
           row_remap_pending AS pending,
           last_value(xid_errors_total IGNORE NULLS) OVER before AS xid_before,
           last_value(ecc_uncorrected_errors_total IGNORE NULLS) OVER before AS uncorrected_before,
           last_value(ecc_corrected_errors_total IGNORE NULLS) OVER before AS corrected_before,
           last_value(remapped_rows_uncorrectable_total IGNORE NULLS) OVER before AS remapped_before,
           last_value(row_remap_pending IGNORE NULLS) OVER before AS pending_before
    FROM gpu_samples
    WHERE time >= from_time AND time < end_time
    WINDOW before AS (PARTITION BY host, gpu_index, time_bucket(INTERVAL 1 MINUTE, time) ORDER BY time
                      ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
), rises AS (
    SELECT *,
           counter_increase(xid, xid_before) AS xid_rise,
           counter_increase(uncorrected, uncorrected_before) AS uncorrected_rise,
           counter_increase(corrected, corrected_before) AS corrected_rise,
           counter_increase(remapped, remapped_before) AS remapped_rise,
           coalesce(pending AND pending_before = false, false) AS pending_rise
    FROM samples
)
SELECT host, gpu_index, minute,
       arg_min(xid, time) AS xid_first,
       min(time) FILTER (WHERE xid IS NOT NULL) AS xid_first_time,
       arg_min_null(last_xid, time) FILTER (WHERE xid IS NOT NULL) AS xid_first_last_xid,
       arg_max(xid, time) AS xid_last,
       sum(xid_rise) AS xid_rise,
       min(time) FILTER (WHERE xid_rise > 0) AS xid_rise_time,
       arg_max(last_xid, time) FILTER (WHERE xid_rise > 0) AS xid_rise_xid,
       arg_min(uncorrected, time) AS uncorrected_first,
       min(time) FILTER (WHERE uncorrected IS NOT NULL) AS uncorrected_first_time,
       arg_max(uncorrected, time) AS uncorrected_last,
       sum(uncorrected_rise) AS uncorrected_rise,
       min(time) FILTER (WHERE uncorrected_rise > 0) AS uncorrected_rise_time,
       arg_min(corrected, time) AS corrected_first,
       arg_max(corrected, time) AS corrected_last,
       sum(corrected_rise) AS corrected_rise,
       arg_min(remapped, time) AS remapped_first,
       min(time) FILTER (WHERE remapped IS NOT NULL) AS remapped_first_time,
       arg_max(remapped, time) AS remapped_last,
       sum(remapped_rise) AS remapped_rise,
       min(time) FILTER (WHERE remapped_rise > 0) AS remapped_rise_time,
       arg_min(pending, time) AS pending_first,
       min(time) FILTER (WHERE pending IS NOT NULL) AS pending_first_time,
       arg_max(pending, time) AS pending_last,
       min(time) FILTER (WHERE pending_rise) AS pending_rise_time
FROM rises
GROUP BY host, gpu_index, minute;

INSERT INTO gpu_counter_minutes BY NAME
SELECT * FROM gpu_counter_parts(TIMESTAMP '-infinity', TIMESTAMP 'infinity');
