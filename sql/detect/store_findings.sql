-- Replace the findings, clearings, evaluation marks and judgements of one partition for every signal in
-- new_evaluations (one row per signal evaluated), inside the caller's transaction: a check step stores its
-- signals together (checks/asset_checks.py). This file clears the partition's rows and writes its marks;
-- sql/detect/insert_rows.sql then inserts the new rows (a shard's step clears only its GPUs' rows first:
-- sql/shards/store_findings.sql).
DELETE FROM findings WHERE partition_start = $start AND signal IN (SELECT signal FROM new_evaluations);
DELETE FROM clearings WHERE partition_start = $start AND signal IN (SELECT signal FROM new_evaluations);
DELETE FROM judgements WHERE partition_start = $start AND signal IN (SELECT signal FROM new_evaluations);
DELETE FROM evaluations WHERE partition_start = $start AND signal IN (SELECT signal FROM new_evaluations);
INSERT INTO evaluations BY NAME SELECT * FROM new_evaluations;
-- Tell the incident fold these (signal, partition)s were written (assets/incidents_incremental.py): one
-- mark however often they are written before the fold reads them (a run killed after its check steps, re-run).
DELETE FROM fold_marks WHERE partition_start = $start AND signal IN (SELECT signal FROM new_evaluations);
INSERT INTO fold_marks SELECT DISTINCT signal, $start FROM new_evaluations;
-- How far the live-windowed signals' results now reach (migration 180, checks/windowed.py): clean, unless a
-- write lowered `dirty_from` below what the check read since it read it. A signal stored without a window
-- row (not windowed, a shard's) has none: its next live run judges the hour whole.
UPDATE check_windows c
SET evaluated_until = n.evaluated_until, version = n.version,
    dirty_from = CASE WHEN c.dirty_from < coalesce(n.read_dirty_from, TIMESTAMP 'infinity') THEN c.dirty_from END
FROM new_windows n
WHERE c.signal = n.signal AND c.partition_start = n.partition_start;
INSERT INTO check_windows
SELECT n.signal, n.partition_start, n.evaluated_until, NULL, n.version
FROM new_windows n
WHERE NOT EXISTS (SELECT 1 FROM check_windows c WHERE c.signal = n.signal AND c.partition_start = n.partition_start);
DELETE FROM check_windows
WHERE partition_start = $start AND signal IN (SELECT signal FROM new_evaluations)
  AND signal NOT IN (SELECT signal FROM new_windows);
