-- Every endpoint with the version it serves now (for the Now page's list of endpoints).
SELECT endpoint, arg_max(model_version, served_from) AS model_version, max(served_from) AS serving_since,
       count(*) AS stints
FROM serving_versions
GROUP BY endpoint
ORDER BY endpoint;
