"""Where the GPU-hours go: the `badput` asset splits every run's allocated GPU-seconds, per minute,
into productive time and nine kinds of badput that sum to it exactly, with the run's model FLOPs
utilization beside them (table `badput_minutes`, migration 060; definitions in docs/analysts.md,
"Where the GPU-hours go").

Each hourly partition reads its hour of GPU samples, the step records and lineage events around it
(the run's trailing baseline, the checkpoint saves and evaluations that bound its pauses) and
replaces its minutes in one transaction. A restart whose first step lands in the hour also rewrites
the minutes since the first step it computed again: only then is it known that they were wasted.
A step's figures over its ranks come from `step_ends` (the training baselines write it per minute) when
its records lie in one minute; only the others are grouped from every rank's records.

A live run (the raw-zone sensor's) splits and writes only the minutes from the first one whose inputs changed
since the hour's last run (`badput_marks`, migration 170; sql/badput/marks.sql): a tick at minute 55 does not
split the 54 minutes before it again. Every other run writes the whole hour; both leave the same rows.
"""

import hashlib
import json
import time
from datetime import datetime
from pathlib import Path

import dagster as dg
import duckdb

from assets.baselines import is_live
from orchestration.config.peak_flops import as_params, peak_table
from orchestration.partitions import hourly, window_params
from orchestration.storage import sql
from orchestration.storage.warehouse import POOL, WarehouseResource, transaction

STAGES = ("badput/scope", "badput/windows", "badput/marks", "badput/write")
"""After sql/badput/extent.sql, in order."""
RESULTS = {"badput/extent": "read_from", "badput/marks": "write_from", "badput/write": "rows"}
"""The parameter a stage's last statement gives the stages after it (`rows`: the caller)."""


class BadputConfig(dg.Config):
    baseline_minutes: int = 120
    """Trailing window of the run's own step-time baseline (its lower quartile of minute medians):
    a slowdown must last most of two hours before it counts as the run's normal."""
    hang_min_seconds: float = 300.0
    """A step or a busy gap longer than this (and than `hang_factor` ideal steps) is a hang, as for
    the busy_not_progressing signal: longer than any checkpoint save or evaluation we expect."""
    hang_factor: float = 20.0
    busy_utilization: float = 0.5
    """A gap whose GPUs average this utilization or more is busy (stuck kernels, unlogged work)."""
    noise_z: float = 4.0
    """A step's data wait or compute time counts as excess beyond this many robust sigmas of the
    run's own step-to-step jitter ..."""
    min_excess_ratio: float = 0.05
    """... and beyond this share of its ideal step."""
    default_precision: str = "bf16"
    """The precision MFU is priced at when run_started carries no `precision`."""


@dg.asset(
    # training_baselines: the hour's step_ends, whose rows are the steps when each lies in one minute
    deps=[dg.AssetDep("gpu_samples"), dg.AssetDep("training_steps"), dg.AssetDep("training_baselines"),
          dg.AssetDep("lineage_events")],
    partitions_def=hourly,
    group_name="baselines",
    kinds={"duckdb"},
    pool=POOL,
)
def badput(context: dg.AssetExecutionContext, config: BadputConfig, warehouse: WarehouseResource) -> dg.MaterializeResult:
    """Per run and minute: allocated GPU-seconds split into productive, start-up, checkpoint save,
    data stall, evaluation, hang, idle, slow steps, wasted progress and unexplained, plus model FLOPs
    utilization (`badput_minutes`; views `badput_by_run`, `badput_by_team_day`, `badput_by_cause`,
    `ettr`, `restart_badput`)."""
    peaks = peak_table(Path(warehouse.path).resolve().parent)
    window = window_params(context.partition_time_window)
    with warehouse.connect() as con, transaction(con):
        done = write_hour(con, window["start"], window["end"], config, peaks, is_live(context))
        totals = con.execute(
            "SELECT coalesce(sum(allocated_gpu_seconds), 0), coalesce(sum(productive_gpu_seconds), 0) "
            "FROM badput_minutes WHERE minute >= $start AND minute < $end", window).fetchone()
    return dg.MaterializeResult(metadata={
        **done,
        "allocated_gpu_hours": round(totals[0] / 3600, 3),
        "productive_gpu_hours": round(totals[1] / 3600, 3),
    })


def write_hour(con: duckdb.DuckDBPyConnection, start: datetime, end: datetime, config: BadputConfig,
               peaks: dict, live: bool, clock: dict | None = None) -> dict:
    """Replace the hour's badput minutes, inside the caller's transaction: from the first minute whose inputs
    changed since the hour's last run when `live` (sql/badput/marks.sql), else all of them. Both leave the same
    rows (tests/test_badput.py). `clock`: filled with each stage's CPU-seconds."""
    params = {"start": start, "end": end, **config.model_dump(), **as_params(peaks)}
    params["version"] = hashlib.sha256("\n".join(
        [json.dumps(params, sort_keys=True, default=str)] + [sql.sql_text(name) for name in ("badput/extent", *STAGES)]
    ).encode()).hexdigest()
    params["live"] = live
    for stage in ("badput/extent", *STAGES):
        before = time.process_time()
        result = sql.run(con, stage, params)
        if stage in RESULTS:
            params[RESULTS[stage]] = result.fetchone()[0]
        if clock is not None:
            clock[f"badput:{stage.split('/')[1]}"] = time.process_time() - before
    return {"rows": params["rows"], "written_from": str(params["write_from"])}
