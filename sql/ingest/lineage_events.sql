-- Replace one hour of lineage events with the partition's good lines; the whole record is the payload.
DELETE FROM lineage_events WHERE time >= $start AND time < $end;
INSERT INTO lineage_events BY NAME
SELECT unnest(rec), time, raw::JSON AS payload, file AS source_file, line AS source_line
FROM parsed WHERE reason IS NULL;  -- already in file, line order (no sort: it cost ~1 s per 1.5 M rows)
