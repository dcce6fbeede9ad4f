-- What the warehouse last ingested of each raw file of the given hours ($hours: partition starts):
-- the raw-zone sensor's record for files its cursor does not hold (its first tick, old hours).
SELECT file, size_bytes
FROM ingest_files
WHERE list_contains($hours::TIMESTAMP[], partition_start);
