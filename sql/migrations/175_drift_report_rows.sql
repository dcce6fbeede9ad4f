-- The rows of the current window when its evidently report was drawn (assets/drift.py): a live tick draws a
-- window's report again only when its verdicts or its reference changed, or its rows doubled since; NULL for
-- the rows stored before this column (their reports are drawn again at the next run).
ALTER TABLE drift_scores ADD COLUMN report_rows BIGINT;
