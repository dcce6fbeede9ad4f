"""The check steps with shards configured (orchestration/shards.py): the signals declared `host_local`
run per hour x shard on each shard's GPUs; the other signals of the sharded `gpu_baselines` (a GPU
against its run's other GPUs, a run's power) run per hour on `gpu_baselines_all_shards`, after every
shard of the hour; every other step is the one checks/asset_checks.py builds, per hour, reading all
shards' rows. orchestration/definitions.py uses these steps in place of `signal_checks`."""

from __future__ import annotations

import dagster as dg

from checks.asset_checks import build_checks, signals_by_step
from orchestration.shards import ALL_SHARDS_ASSET, SHARDED_ASSETS, Shard, hour_by_shard


def sharded_checks(shards: tuple[Shard, ...]) -> list[dg.AssetChecksDefinition]:
    steps = []
    for asset, group in signals_by_step().items():
        if asset not in SHARDED_ASSETS:
            steps.append(build_checks(group, f"{asset}_checks"))
            continue
        local = [s for s in group if s.host_local]
        rest = [s for s in group if not s.host_local]
        if local:
            steps.append(build_checks(local, f"{asset}_checks", partitions_def=hour_by_shard(shards), shards=shards))
        if rest:
            steps.append(build_checks(rest, f"{ALL_SHARDS_ASSET}_checks", asset=ALL_SHARDS_ASSET))
    return steps
