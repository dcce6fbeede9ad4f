"""Baseline assets: per-minute time series per run, rank and GPU with their rolling robust baselines.

`training_baselines` writes `run_minutes` and `rank_minutes`, `gpu_baselines` writes `gpu_minutes`
(schema: sql/migrations/002_baselines.sql). Each row carries the median and MAD of the trailing
window (the current minute excluded), so detectors and analysts read the same baseline. Each hourly
partition reads its own lookback from the ingest tables and replaces its hour atomically.
"""

import dagster as dg

from orchestration import sql
from orchestration.partitions import hourly, window_params
from orchestration.warehouse import POOL, WarehouseResource, transaction


class BaselineConfig(dg.Config):
    window_minutes: int = 30
    """Trailing window of the rolling median/MAD: long enough to hold ~15 checkpoint/eval cycles'
    worth of ordinary minutes, short enough to follow a learning-rate schedule."""


def _replace(warehouse: WarehouseResource, names: tuple[str, ...], params: dict) -> dict[str, int]:
    with warehouse.connect() as con, transaction(con):
        return {name: sql.run(con, f"baselines/{name}", params).fetchone()[0] for name in names}


def _this_and_previous_hour(asset: str) -> dg.AssetDep:
    """The trailing window reaches into the previous hour: depend on it, so backfills order the hours."""
    return dg.AssetDep(asset, partition_mapping=dg.TimeWindowPartitionMapping(start_offset=-1))


@dg.asset(
    deps=[_this_and_previous_hour("training_steps")],
    partitions_def=hourly,
    group_name="baselines",
    kinds={"duckdb"},
    pool=POOL,
)
def training_baselines(
    context: dg.AssetExecutionContext, config: BaselineConfig, warehouse: WarehouseResource
) -> dg.MaterializeResult:
    """Per-minute run and rank time series (step time, throughput, loss, grad norm, collective and
    compute time, allocator figures, peer medians) with trailing median/MAD baselines
    (`run_minutes`, `rank_minutes`)."""
    params = {**window_params(context.partition_time_window), "window_minutes": config.window_minutes}
    rows = _replace(warehouse, ("run_minutes", "rank_minutes"), params)
    return dg.MaterializeResult(metadata={**rows, "window_minutes": config.window_minutes})


@dg.asset(
    deps=[_this_and_previous_hour("gpu_samples")],
    partitions_def=hourly,
    group_name="baselines",
    kinds={"duckdb"},
    pool=POOL,
)
def gpu_baselines(context: dg.AssetExecutionContext, config: BaselineConfig, warehouse: WarehouseResource) -> dg.MaterializeResult:
    """Per-minute GPU time series (utilization, power, temperature, clocks, throttle reasons, ECC,
    XID, row remapping) with each GPU's trailing clock and power baselines (`gpu_minutes`)."""
    params = {**window_params(context.partition_time_window), "window_minutes": config.window_minutes}
    rows = _replace(warehouse, ("gpu_minutes",), params)
    return dg.MaterializeResult(metadata={**rows, "window_minutes": config.window_minutes})
