-- Synthetic predictions for bench/bench_drift.py: $n rows of endpoint 'bench-api', version 'v1',
-- spread evenly over [$from, $from + 1 hour), features like the simulator's, prompt_tokens scaled by
-- (1 + $shift) (0: the reference's distribution).
INSERT INTO predictions BY NAME
SELECT $from + to_microseconds(CAST(i * 3600000000 // $n AS BIGINT)) AS time,
       'bench-api' AS endpoint, 'v1' AS model_version, $prefix || i AS request_id,
       json_object('prompt_tokens', CAST((8 + random() * 2040) * (1 + $shift) AS INTEGER),
                   'max_tokens', [64, 128, 256, 512][1 + CAST(floor(random() * 4) AS INTEGER)],
                   'language', ['en', 'de', 'fr', 'ja', 'es'][1 + CAST(floor(random() * 5) AS INTEGER)],
                   'temperature', round(random(), 2)) AS features,
       ['positive', 'negative', 'neutral'][1 + CAST(floor(random() * 3) AS INTEGER)] AS prediction,
       round(0.5 + random() * 0.5, 4) AS confidence,
       'bench' AS source_file, CAST(i AS INTEGER) AS source_line
FROM range($n) t(i);
