-- Windowed live checks (issue 15: every tick judged the hour so far, so a tick at minute 55 read eleven
-- times the rows of one at minute 5). Per signal that evaluates live by window (`Signal.live_window`) and
-- hourly partition: how far its stored results reach (`evaluated_until`, the last tick judged), the first
-- minute whose inputs changed since (`dirty_from`; NULL: none did; ingest lowers it in the transaction
-- that writes the rows, sql/baselines/mark_dirty.sql), and what they were computed with (`version`: its
-- thresholds, SQL and detector). A live run judges from the first changed minute with the signal's lookback
-- and joins that to the stored rows (checks/windowed.py); without a row, or another version, it judges the
-- whole hour. Raw retention removes the rows (sql/maintenance/delete_raw.sql).
CREATE TABLE check_windows (
    signal                        VARCHAR   NOT NULL,
    partition_start               TIMESTAMP NOT NULL,
    evaluated_until               TIMESTAMP,
    dirty_from                    TIMESTAMP,
    version                       VARCHAR   NOT NULL,
    PRIMARY KEY (signal, partition_start)
);
