-- One signal's stored findings, clearings, judgements and evaluation mark of partition $start, which a live
-- window joins its own to (checks/windowed.py): the statement naming /*@table*/ is run once per table.
SELECT * FROM /*@table*/ WHERE partition_start = $start AND signal = $signal;
