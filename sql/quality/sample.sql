-- Up to $max_rows predictions of one endpoint in [$from, $until) (of one version unless $version is
-- null): a deterministic uniform sample, ordered by a hash of the request id, so a re-run draws the
-- same rows and a window under the cap is read whole.
SELECT time, model_version, request_id, features, prediction, confidence
FROM predictions
WHERE endpoint = $endpoint AND time >= $from AND time < $until
  AND ($version IS NULL OR model_version = $version)
ORDER BY hash(request_id), request_id
LIMIT $max_rows;
