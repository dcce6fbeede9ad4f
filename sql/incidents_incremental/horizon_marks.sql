-- The empty evaluation marks (no entity to look at) whose hour ended between the horizon the last
-- fold saw and this one's ($lo, $hi]: they turned evaluated (or back), as a written mark would.
SELECT signal, partition_start, NULL::TIMESTAMP AS evaluated_until
FROM evaluations
WHERE evaluated_until IS NULL
  AND partition_start + INTERVAL 1 HOUR > $lo AND partition_start + INTERVAL 1 HOUR <= $hi;
