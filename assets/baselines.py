"""Baseline assets: per-minute time series per run, rank and GPU with their rolling robust baselines.

`training_baselines` writes `run_minutes` and `rank_minutes`, `gpu_baselines` writes `gpu_minutes`
(schema: sql/migrations/002_baselines.sql). Each row carries the median and MAD of the trailing
window (the current minute excluded), so detectors and analysts read the same baseline. Each hourly
partition reads its own lookback from the ingest tables and replaces its hour atomically.
`training_baselines` also writes `step_ends` (sql/migrations/155_step_ends.sql): when each step's last
rank reported it, per minute, which busy_not_progressing reads instead of every rank's records.

A live run (the raw-zone sensor's, tagged with the hour's data version) recomputes only the minutes
whose inputs changed since the last computation, from the first minute ingest marked dirty
(`baseline_dirty`, sql/migrations/130_baseline_dirty.sql), with its lookback: a tick at minute 55
costs what one at minute 5 does. Every other run (a backfill, a materialization from the UI, the
demo) computes the whole hour. Both give the same rows (tests/test_baselines_incremental.py).

With shards configured, `gpu_minutes` is computed per hour x shard (assets/sharded.py: the shard's hosts'
rows, the whole hour every run); `run_minutes` and `rank_minutes` stay per hour.
"""

from datetime import datetime, timedelta

import dagster as dg
import duckdb
import pandas as pd

from orchestration.partitions import hourly, naive_utc
from orchestration.shards import Shard
from orchestration.storage import sql
from orchestration.storage.raw_zone import is_live_run
from orchestration.storage.warehouse import POOL, WarehouseResource, transaction


class BaselineConfig(dg.Config):
    window_minutes: int = 30
    """Trailing window of the rolling median/MAD: long enough to hold ~15 checkpoint/eval cycles'
    worth of ordinary minutes, short enough to follow a learning-rate schedule."""


def changed_from(con: duckdb.DuckDBPyConnection, source: str, start: datetime, window_minutes: int) -> datetime | None:
    """The first minute of the partition at `start` whose series may have changed: its start when it
    was never computed (or with another window), None when nothing it reads changed since."""
    state = sql.frame(con, "baselines/dirty", {"source": source, "start": start})
    if state.empty or int(state["window_minutes"].iloc[0]) != window_minutes:
        return start
    dirty = state["dirty_from"].iloc[0]
    return None if pd.isna(dirty) else max(pd.Timestamp(dirty).to_pydatetime(), start)


def series_params(start: datetime, end: datetime, window_minutes: int, first: datetime | None = None) -> dict:
    """The parameters of sql/baselines/{run,rank,gpu}_minutes.sql: the hour [start, end) from `first`
    (default: all of it). The rows are read from the lookback of the first minute computed: the
    partition's when all of it is; else one minute more, so that window's first minute has every
    row it had when it was computed."""
    first = start if first is None else first
    read_from = start - timedelta(minutes=window_minutes) if first == start else first - timedelta(minutes=window_minutes + 1)
    return {"start": start, "end": end, "from": first, "read_from": read_from, "window_minutes": window_minutes}


SHARD_ROWS = "/*@shard*/"
SHARD_FILTER = "AND shard_of(host, $shards::VARCHAR[][]) = $shard"


def replace_shard_series(con: duckdb.DuckDBPyConnection, names: tuple[str, ...], shard: Shard, start: datetime,
                         end: datetime, window_minutes: int) -> dict:
    """Replace one shard's rows of the partition's series `names` (their `/*@shard*/` markers filled with the
    shard's filter) for the whole hour, in one transaction. Each series is per host, so a shard's rows
    are the ones the whole hour's computation gives."""
    start, end = naive_utc(start), naive_utc(end)
    params = {**series_params(start, end, window_minutes), **shard.params()}
    texts = {name: sql.sql_text(f"baselines/{name}") for name in names}
    for name, text in texts.items():
        if SHARD_ROWS not in text:
            raise RuntimeError(f"sql/baselines/{name}.sql has no {SHARD_ROWS} marker: it cannot run per shard")
    with transaction(con):
        rows = {name: sql.execute_text(con, text.replace(SHARD_ROWS, SHARD_FILTER), params).fetchone()[0]
                for name, text in texts.items()}
    return {**rows, "recomputed_from": str(start), "shard": shard.name}


def replace_series(con: duckdb.DuckDBPyConnection, source: str, names: tuple[str, ...], start: datetime, end: datetime,
                   window_minutes: int, live: bool) -> dict:
    """Replace the partition's series `names` (sql/baselines/<name>.sql), read from `source`, in one
    transaction: from the first changed minute when `live`, else the whole hour; then mark it clean."""
    start, end = naive_utc(start), naive_utc(end)
    with transaction(con):
        first = changed_from(con, source, start, window_minutes) if live else start
        if first is None:   # nothing it reads changed: the stored rows stand
            return {"recomputed_from": "nothing changed"}
        params = series_params(start, end, window_minutes, first)
        rows = {name: sql.run(con, f"baselines/{name}", params).fetchone()[0] for name in names}
        if "run_minutes" in names:   # each run's first minute, kept beside its series (sql/baselines/run_starts.sql)
            sql.run(con, "baselines/run_starts", {"start": start, "end": end})
        sql.run(con, "baselines/mark_clean", {"source": source, "start": start, "window_minutes": window_minutes})
    return {**rows, "recomputed_from": str(first)}


GPU_SERIES = ("gpu_minutes", "gpu_counter_minutes")   # what the GPU baselines write, per hour or per hour x shard


def is_live(context: dg.AssetExecutionContext) -> bool:
    """A run the raw-zone sensor requested for new data (not a backfill or a materialization)."""
    return is_live_run(context.run.tags)


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
    (`run_minutes`, `rank_minutes`), and when each step ended (`step_ends`)."""
    window = context.partition_time_window
    with warehouse.connect() as con:
        rows = replace_series(con, "training_steps", ("run_minutes", "rank_minutes", "step_ends"), window.start,
                              window.end, config.window_minutes, is_live(context))
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
    XID, row remapping) with each GPU's trailing clock and power baselines (`gpu_minutes`), and the
    hardware counters' readings and rises within each minute (`gpu_counter_minutes`)."""
    window = context.partition_time_window
    with warehouse.connect() as con:
        rows = replace_series(con, "gpu_samples", GPU_SERIES, window.start, window.end, config.window_minutes,
                              is_live(context))
    return dg.MaterializeResult(metadata={**rows, "window_minutes": config.window_minutes})
