-- Which of the given hosts ($hosts) belong to shard $shard.
SELECT host FROM unnest($hosts::VARCHAR[]) AS t(host) WHERE shard_of(host, $shards::VARCHAR[][]) = $shard;
