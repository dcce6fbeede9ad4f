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
