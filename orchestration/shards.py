"""Shards: host groups from `shards:` in GOODPUT_HOME/service.yaml, and the hour x shard partitions.

With shards configured, the work that reads only one host's records (the GPU samples' ingest, the
per-minute GPU series, the per-GPU checks declared `host_local`) is partitioned by hour and shard, so
different shards of one hour run on different workers at once; the rest stays one partition per hour
and reads every shard's rows of the lake (orchestration/jobs.py, docs/deploy.md). Without shards
nothing here is used and every partition is one hour, as before.

A host belongs to the first shard with a pattern that matches its name, and a host that no pattern
matches (or a row without a host) to the last shard, so no row is ever left out. Patterns take `*`
and `?` only (service_config.py checks), so that Python's `fnmatchcase` here and DuckDB's `GLOB` in
the `shard_of` macro (sql/migrations/150_shards.sql) are one rule; tests/test_shards.py holds them equal.

A raw file `<producer>.jsonl` whose producer name a shard's pattern matches (an agent writes one file
per host, named after it) is that shard's alone; any other file (`prometheus.jsonl`, one file for every
host) is read by every shard, each keeping its own hosts' rows.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

import dagster as dg

from orchestration.config.service_config import load_service_settings
from orchestration.partitions import hourly

# The partition mappings between hour and hour x shard are "beta" in Dagster 1.13; they are what shards need.
warnings.filterwarnings("ignore", category=dg.BetaWarning)

HOUR = "hour"
SHARD = "shard"


@dataclass(frozen=True)
class Shard:
    """One shard (`name`, 1-based `index`) among every configured shard's patterns, in order."""

    name: str
    index: int
    patterns: tuple[tuple[str, ...], ...]

    def owns_host(self, host: str | None) -> bool:
        return owner(host, self.patterns) == self.index

    def params(self) -> dict:
        """The `$shard` / `$shards` parameters of the SQL that keeps only this shard's rows."""
        return {"shard": self.index, "shards": [list(p) for p in self.patterns]}

    def log_source(self, folder: str) -> str:
        """The ingest log's `source` for this shard's read of `folder` (quarantine, files, offsets)."""
        return f"{folder}@{self.name}"


def owner(host: str | None, patterns: tuple[tuple[str, ...], ...]) -> int:
    """The 1-based index of the shard `host` belongs to (the SQL macro `shard_of` in Python)."""
    if host is not None:
        for index, group in enumerate(patterns, start=1):
            if any(fnmatchcase(host, p) for p in group):
                return index
    return len(patterns)


def configured(home: Path) -> tuple[Shard, ...]:
    """The home's shards in configuration order (empty: not sharded)."""
    groups = load_service_settings(home).shards
    patterns = tuple(tuple(g.hosts) for g in groups)
    return tuple(Shard(g.name, i, patterns) for i, g in enumerate(groups, start=1))


def named(shards: tuple[Shard, ...], name: str) -> Shard:
    for shard in shards:
        if shard.name == name:
            return shard
    raise KeyError(f"unknown shard {name!r}; configured shards: {', '.join(s.name for s in shards) or 'none'}")


def file_owner(relative: str, shards: tuple[Shard, ...]) -> str | None:
    """The shard whose pattern names the file's producer (`<source>/<day>/<HH>/<producer>.jsonl[.zst]`),
    or None when no pattern does: every shard reads it."""
    producer = relative.rsplit("/", 1)[-1].split(".jsonl", 1)[0]
    for shard in shards:
        if any(fnmatchcase(producer, p) for p in shard.patterns[shard.index - 1]):
            return shard.name
    return None


def hour_by_shard(shards: tuple[Shard, ...]) -> dg.MultiPartitionsDefinition:
    """The partitions of the per-host work: every hour (orchestration/partitions.py) x every shard."""
    return dg.MultiPartitionsDefinition({HOUR: hourly, SHARD: dg.StaticPartitionsDefinition([s.name for s in shards])})


def partition_key(hour: str, shard: str) -> dg.MultiPartitionKey:
    return dg.MultiPartitionKey({HOUR: hour, SHARD: shard})


def shard_of_run(context, shards: tuple[Shard, ...]) -> Shard | None:
    """The shard a step's partition names, or None for an hour partition."""
    key = context.partition_key
    if isinstance(key, dg.MultiPartitionKey):
        return named(shards, key.keys_by_dimension[SHARD])
    return None


# The hour-level work that reads a shard-partitioned asset waits for every shard of its hour.
EVERY_SHARD_OF_THE_HOUR = dg.MultiToSingleDimensionPartitionMapping(partition_dimension_name=HOUR)

SHARDED_SOURCE = "gpu_samples"   # the raw source whose records are per host
SHARDED_ASSETS = ("gpu_samples", "gpu_baselines")   # partitioned by hour x shard when shards are configured
ALL_SHARDS_ASSET = "gpu_baselines_all_shards"   # one hour partition after every shard's (assets/sharded.py)


def run_tags(hour: str, shard: str) -> dict[str, str]:
    """The tags of a run of one hour x shard partition (what a run request or a backfill gives it)."""
    return {"dagster/partition": str(partition_key(hour, shard)), f"dagster/partition/{HOUR}": hour,
            f"dagster/partition/{SHARD}": shard}
