"""The per-host assets as hour x shard partitions, for a home with `shards:` in service.yaml.

`sharded_assets(shards)` builds, under the same asset keys, `gpu_samples` (each shard ingests the raw
files of its hosts, and the files no host owns, keeping its hosts' lines) and `gpu_baselines` (each
shard's `gpu_minutes`), partitioned by hour and shard (orchestration/shards.py), plus
`gpu_baselines_all_shards`: one hour partition that follows every shard of its hour, sums the shards'
evaluation marks into the hour's, and carries the hour-level work that reads every GPU (the GPU checks
that compare a GPU with its run's others).
orchestration/definitions.py puts them in place of the hourly `gpu_samples` and `gpu_baselines`; nothing
here is loaded without shards.
"""


import dagster as dg

from assets.baselines import GPU_SERIES, BaselineConfig, replace_shard_series
from assets.ingest_core import SOURCES, RawSource
from assets.ingest_incremental import ingest_hour
from orchestration.partitions import hourly, window_params
from orchestration.shards import (
    ALL_SHARDS_ASSET,
    EVERY_SHARD_OF_THE_HOUR,
    HOUR,
    SHARD,
    SHARDED_SOURCE,
    Shard,
    file_owner,
    hour_by_shard,
    shard_of_run,
)
from orchestration.storage import sql
from orchestration.storage.raw_watch import relative_key
from orchestration.storage.raw_zone import RawZoneResource
from orchestration.storage.warehouse import POOL, WarehouseResource, transaction

# gpu_minutes' trailing window reads the previous hour of the same shard's samples
_PREVIOUS_HOUR_SAME_SHARD = dg.MultiPartitionMapping({
    HOUR: dg.DimensionPartitionMapping(HOUR, dg.TimeWindowPartitionMapping(start_offset=-1)),
    SHARD: dg.DimensionPartitionMapping(SHARD, dg.IdentityPartitionMapping()),
})


def _source(folder: str) -> RawSource:
    return next(s for s in SOURCES if s.folder == folder)


def sharded_ingest(shards: tuple[Shard, ...]) -> dg.AssetsDefinition:
    source = _source(SHARDED_SOURCE)

    @dg.asset(
        name=source.table,
        partitions_def=hour_by_shard(shards),
        group_name="ingest",
        kinds={"duckdb"},
        pool=POOL,
        deps=[dg.AssetDep(p, partition_mapping=EVERY_SHARD_OF_THE_HOUR) for p in source.producers],
        description=source.description + " One partition per hour and shard: the shard's hosts' rows of the hour are "
                    "replaced atomically; bad lines go to `quarantine` (source `<folder>@<shard>`).",
    )
    def _ingest(context: dg.AssetExecutionContext, warehouse: WarehouseResource,
                raw_zone: RawZoneResource) -> dg.MaterializeResult:
        shard = shard_of_run(context, shards)
        window = context.partition_time_window
        files = [f for f in raw_zone.files(source.folder, window.start, report=context.log.warning)
                 if file_owner(relative_key(str(f)), shards) in (None, shard.name)]
        with warehouse.connect() as con:
            result = ingest_hour(con, source, files, window.start, window.end, shard=shard)
        if result["rows_quarantined"]:
            context.log.warning(f"{source.folder} {context.partition_key}: {result['rows_quarantined']} line(s) quarantined: "
                                + "; ".join(f"{reason} ({n})" for reason, n in result["reasons"]))
        return dg.MaterializeResult(metadata={
            "shard": shard.name, "files": result["files"], "rows_loaded": result["rows_loaded"],
            "rows_quarantined": result["rows_quarantined"], "parse": result["parse"],
            "bytes_read": result.get("bytes_read", 0)})

    return _ingest


def sharded_gpu_baselines(shards: tuple[Shard, ...]) -> dg.AssetsDefinition:
    @dg.asset(
        name="gpu_baselines",
        deps=[dg.AssetDep("gpu_samples", partition_mapping=_PREVIOUS_HOUR_SAME_SHARD)],
        partitions_def=hour_by_shard(shards),
        group_name="baselines",
        kinds={"duckdb"},
        pool=POOL,
    )
    def _gpu_baselines(context: dg.AssetExecutionContext, config: BaselineConfig,
                       warehouse: WarehouseResource) -> dg.MaterializeResult:
        """Per-minute GPU time series with each GPU's trailing clock and power baselines (`gpu_minutes`) and
        the hardware counters within each minute (`gpu_counter_minutes`), one shard's hosts per partition (the
        whole hour each run)."""
        window = context.partition_time_window
        with warehouse.connect() as con:
            rows = replace_shard_series(con, GPU_SERIES, shard_of_run(context, shards), window.start, window.end,
                                        config.window_minutes)
        return dg.MaterializeResult(metadata={**rows, "window_minutes": config.window_minutes})

    return _gpu_baselines


def all_shards_asset() -> dg.AssetsDefinition:
    @dg.asset(
        name=ALL_SHARDS_ASSET,
        # the checks on it read the hour's run minutes (a run's power against its steps) and lineage (GPUs a
        # run names): after those too, as the unsharded job's GPU check step happens to run
        deps=[dg.AssetDep("gpu_baselines", partition_mapping=EVERY_SHARD_OF_THE_HOUR), "training_baselines",
              "lineage_events"],
        partitions_def=hourly,
        group_name="baselines",
        kinds={"duckdb"},
        pool=POOL,
    )
    def _all_shards(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.MaterializeResult:
        """The hour's GPUs of every shard: it follows every shard's `gpu_baselines` of its hour, writes the hour's
        evaluation marks of the per-GPU checks as the sum of the shards' (`shard_evaluations`: a shard writes
        only its own, so that two shards committing at once never race on a shared row), and the checks on it (a
        GPU judged against its run's other GPUs, on any host) read every shard's `gpu_minutes`."""
        with warehouse.connect() as con, transaction(con):
            rows = sql.run(con, "shards/sum_evaluations", {"start": window_params(context.partition_time_window)["start"]})
            rows = rows.fetchone()[0]
        return dg.MaterializeResult(metadata={"gpu_minutes": rows})

    return _all_shards


def sharded_assets(shards: tuple[Shard, ...]) -> list[dg.AssetsDefinition]:
    """The assets that replace the hourly `gpu_samples` and `gpu_baselines` when `shards` are configured."""
    return [sharded_ingest(shards), sharded_gpu_baselines(shards), all_shards_asset()]
