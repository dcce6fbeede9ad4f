-- The partition's data clock: the latest step record or lineage event inside it (null when none).
SELECT max(t) AS horizon FROM (
    SELECT max(time) AS t FROM training_steps WHERE time >= $start AND time < $end
    UNION ALL
    SELECT max(time) AS t FROM lineage_events WHERE time >= $start AND time < $end
);
