-- Hour x shard partitions (issue 21, orchestration/shards.py). `shard_of(host, shards)`: the 1-based
-- index of the shard a host belongs to, `shards` being every configured shard's host patterns in order
-- (`*` and `?`): the first shard with a matching pattern, else the last (a host no pattern names, a row
-- without a host). orchestration/shards.py `owner` is the same rule in Python.
CREATE MACRO shard_of(host, shards) AS
    coalesce(list_position(list_transform(shards,
        patterns -> coalesce(list_bool_or(list_transform(patterns, p -> host GLOB p)), false)), true), len(shards));

-- A shard's evaluation mark of a per-GPU signal on one hour: each shard judges its own GPUs, and the
-- hour's `evaluations` row (what the incident fold reads) is their sum, the same row one unsharded
-- evaluation writes, written once after every shard (sql/shards/sum_evaluations.sql).
CREATE TABLE shard_evaluations (
    signal                        VARCHAR   NOT NULL,
    partition_start               TIMESTAMP NOT NULL,
    shard                         VARCHAR   NOT NULL,
    evaluated_until               TIMESTAMP,
    entities                      INTEGER   NOT NULL,
    flagged                       INTEGER   NOT NULL,
    entity_ids                    VARCHAR[],
    flagged_ids                   VARCHAR[]
);
