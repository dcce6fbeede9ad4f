"""Hand-made detector inputs shared by the detector tests: per-minute GPU frames, per-rank frames with
slow pieces, 10-second GPU samples, and one signal's findings from its SQL on a real warehouse."""

import contextlib
from datetime import datetime

import duckdb
import numpy as np
import pandas as pd

import checks.signals  # noqa: F401  (registers the signals)
from assets.baselines import GPU_SERIES
from checks.registry import REGISTRY
from orchestration.storage import sql
from orchestration.storage.warehouse import migrate

T0 = pd.Timestamp("2026-11-30 10:00:00")      # the partition's start
LIMIT = 700.0
BOOST = 1.97e9


def th(name, **over):
    return {**REGISTRY.get(name).thresholds, **over}


def gpu_frame(minutes=60, lookback=30, gpu=0, run="run-a", changes=()):
    """One GPU's minutes from T0 - lookback to T0 + minutes, training healthily, with `changes`:
    (from_minute, to_minute, {column: value}) applied to minutes in [from, to) (minutes from T0)."""
    rows = []
    for m in range(-lookback, minutes):
        minute = T0 + pd.Timedelta(minutes=m)
        row = {
            "host": "node-0", "gpu_index": gpu, "gpu_uuid": f"GPU-{gpu}", "minute": minute,
            "tick": minute + pd.Timedelta(minutes=1), "in_window": minute >= T0, "run_id": run, "samples": 6,
            "utilization_ratio": 0.96, "throttle_reasons": 0, "sm_clock_hertz": BOOST, "sm_clock_baseline": BOOST,
            "baseline_minutes": 30, "temperature_celsius": 62.0, "power_watts": 0.75 * LIMIT,
            "power_limit_watts": LIMIT, "power_watts_baseline": 0.75 * LIMIT, "tensor_active_ratio": 0.45,
            "sm_active_ratio": 0.8, "memory_used_bytes": 68 * 2**30, "others_utilization": 0.96, "other_gpus": 3,
            "xid_increase": 0, "event_time": pd.NaT, "event_xid": None, "xid_errors_total": 0,
            "uncorrected_increase": 0, "corrected_increase": 0, "remapped_uncorrectable_increase": 0,
            "pending_raised": False, "row_remap_pending": False, "ecc_uncorrected_errors_total": 0,
            "row_remap_failure": False, "failure_since": pd.NaT, "remapped_rows_uncorrectable_total": 0,
        }
        for start, end, values in changes:
            if start <= m < end:
                row.update({k: (v(minute) if callable(v) else v) for k, v in values.items()})
        rows.append(row)
    return pd.DataFrame(rows)


def samples(host, gpu, **series):
    """A GPU's samples every 10 s from T0 - 30 min to T0 + 60 min; each series is f(seconds from T0)."""
    t = pd.date_range(T0 - pd.Timedelta(minutes=30), T0 + pd.Timedelta(minutes=60), freq="10s", inclusive="left")
    secs = (t - T0).total_seconds()
    frame = pd.DataFrame({"time": t, "host": host, "gpu_index": gpu, "gpu_uuid": f"GPU-{host}-{gpu}", "run_id": "run-a",
                          "source_file": "test", "source_line": range(len(t))})
    for column, fn in series.items():
        frame[column] = [fn(s) for s in secs]
    return frame.dropna(axis=1, how="all")      # a series the exporter lacks is simply absent (NULL)


EVERY = {"from": datetime(1970, 1, 1), "start": datetime(1970, 1, 1), "end": datetime(2100, 1, 1),
         "read_from": datetime(1970, 1, 1), "window_minutes": 30}   # sql/baselines' parameters over every row held


def derive(con: duckdb.DuckDBPyConnection, names: tuple[str, ...]) -> None:
    """Write the series `names` (sql/baselines/<name>.sql) from every raw row the warehouse holds."""
    for name in names:
        sql.run(con, f"baselines/{name}", EVERY)


def gpu_series(con: duckdb.DuckDBPyConnection) -> None:
    """What the GPU baselines derive from `gpu_samples` (gpu_minutes, gpu_counter_minutes), for every sample held."""
    derive(con, GPU_SERIES)


def counter_findings(tmp_path, signal_name, frames):
    from checks.asset_checks import evaluate
    from orchestration.storage.warehouse import WarehouseResource

    warehouse = WarehouseResource(path=str(tmp_path / f"{signal_name}.duckdb"))
    rows = pd.concat(frames, ignore_index=True)
    with warehouse.connect() as con:
        con.register("rows", rows)
        con.execute("INSERT INTO gpu_samples BY NAME SELECT * FROM rows")
        gpu_series(con)
        _, found = evaluate(con, REGISTRY.get(signal_name), T0.to_pydatetime(), (T0 + pd.Timedelta("1h")).to_pydatetime())
    return found


def rank_frame(ranks=8, minutes=60, lookback=30, changes=(), seed=0):
    """Per rank and minute from T0 - lookback to T0 + minutes: a 2 s step (1.6 s compute, 0.35 s
    collective, grad norm 1.0) with a little per-rank jitter; `changes` = (from, to, {col: value or
    f(row)}, ranks) applied to minutes in [from, to)."""
    rng = np.random.default_rng(seed)
    rows = []
    for m in range(-lookback, minutes):
        minute = T0 + pd.Timedelta(minutes=m)
        for r in range(ranks):
            row = {
                "run_id": "run-a", "rank": r, "host": f"node-{r // 4}", "gpu_index": r % 4, "minute": minute,
                "tick": minute + pd.Timedelta(minutes=1), "in_window": minute >= T0, "steps_completed": 30,
                "step_seconds": 2.0, "compute_seconds": 1.6 * rng.lognormal(0, 0.003),
                "collective_seconds": 0.35 * rng.lognormal(0, 0.02), "compute_seconds_baseline": 1.6,
                "compute_seconds_mad": 0.004, "baseline_minutes": 30, "grad_norm": 1.0 * rng.lognormal(0, 0.02),
                "grad_norm_ratio_baseline": 1.0, "peer_grad_norm": 1.0,
                "gpu_temperature_celsius": 63.0, "gpu_throttle_reasons": 0, "gpu_sm_clock_hertz": 1.97e9,
                "gpu_sm_clock_baseline": 1.97e9, "gpu_power_watts": 520.0, "gpu_power_limit_watts": 700.0,
                "gpu_last_xid": None, "gpu_utilization": 0.96,
                # rank_dropout columns
                "last_step_time": minute + pd.Timedelta(seconds=59), "run_last_step_time": minute + pd.Timedelta(seconds=59),
                "step_interval_seconds": 2.0, "gpus_held": ranks, "gpu_held": True, "gpu_run_id": "run-a", "gpu_samples": 6,
            }
            for start, end, values, which in changes:
                if start <= m < end and r in which:
                    row.update({k: (v(row) if callable(v) else v) for k, v in values.items()})
            rows.append(row)
    return pd.DataFrame(rows)


def slow(factor, which, ranks=8):
    """Changes that make `which` compute `factor` x and every other rank wait for them."""
    extra = 1.6 * (factor - 1)
    return [({"compute_seconds": 1.6 * factor, "collective_seconds": 0.03}, set(which)),
            ({"collective_seconds": lambda r: 0.35 + extra}, set(range(ranks)) - set(which))]


def spans(*pieces, ranks=8, **kw):
    """rank_frame with (start, end, factor, which) slow pieces."""
    return rank_frame(ranks=ranks, changes=[(a, b, values, who) for a, b, factor, which in pieces
                                            for values, who in slow(factor, which, ranks)], **kw)


@contextlib.contextmanager
def warehouse_of(**tables: pd.DataFrame):
    """An in-memory, migrated warehouse holding `tables` (name -> rows; columns the table lacks are dropped),
    with the step ends the training baselines derive from `training_steps` (sql/baselines/step_ends.sql)."""
    with duckdb.connect() as con:
        migrate(con)
        for table, rows in tables.items():
            columns = {c for (c,) in con.execute("SELECT column_name FROM duckdb_columns() WHERE table_name = $t",
                                                  {"t": table}).fetchall()}
            con.register("rows", rows[[c for c in rows.columns if c in columns]])
            con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM rows")
            con.unregister("rows")
        if "training_steps" in tables:
            derive(con, ("step_ends",))
        yield con
