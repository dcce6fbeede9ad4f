-- A per-GPU signal's series for one shard's hosts: the signal's query (a `host`, `gpu_index` and
-- `minute` column, filled in by checks/asset_checks.py shared_read) kept to the shard's rows. Its windows
-- are per host and GPU, so its rows are the ones the whole hour's query gives, in its order.
SELECT * FROM (
/*@query*/
) AS series
WHERE shard_of(series.host, $shards::VARCHAR[][]) = $shard
ORDER BY series.host, series.gpu_index, series.minute
