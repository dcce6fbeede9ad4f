"""The hang detector: a run whose GPUs look busy but do no work (NCCL kernels spin-waiting in a collective
that will not complete). A run-level signal on the GPU frames (sql/detect/gpu_busy_low_power.sql), apart
from the per-GPU hardware detectors in checks/detectors_gpu.py.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from checks.toolkit import (
    MINUTE,
    active_stretches,
    empty_findings,
    finding,
    findings_frame,
    mark_stretches,
    num,
    suspects,
    timestamp,
)


def gpu_busy_low_power(frame: pd.DataFrame, thresholds: Mapping[str, float]) -> pd.DataFrame:
    """A run whose GPUs look busy but do no work: utilization near 100% while power stays under
    `max_power_ratio` of the limit and the tensor pipes idle (when profiled). That is NCCL kernels
    spin-waiting in a collective that will not complete: a hang, or peers of a dead rank.

    One finding per run (not per GPU), when at least `min_share` of the run's held GPUs spin for
    `min_minutes`. Entering is judged from the GPU's own history where it has some: its trailing
    draw while held was at working level (above `max_power_ratio` of the limit) and the power fell
    to `max_power_drop` of it, so a workload that always draws little is not flagged. Where it has
    none (watching began in the hang, or the trailing window is all hang), from physics alone: a
    kernel doing work at full utilization, memory-bound included, draws well over a third of the
    board's limit and keeps most SMs active, while a spin kernel draws little more than an idle
    board (`max_cold_power_ratio`) on a few SMs (`max_spin_sm_active`, when profiled). A GPU whose
    power limit is unknown is not judged: watts alone have no scale across models (150 W is an
    idle H100 and a loaded L4).

    Sooner, after `fast_min_minutes`, when two independent witnesses agree, history or none: EVERY
    GPU the run holds spins at a spin's draw (<= `max_cold_power_ratio` of its limit) AND the run's
    steps stopped (no step logged in the minute, nor for `stall_log_intervals` of its own logging
    interval). A collective that will not complete holds every surviving rank; a checkpoint save's
    barrier leaves the writer idle, a data stall leaves the GPUs idle, an inference server logs no
    steps, a throttled run keeps stepping, so each falls to the `min_minutes` path or to none.
    """
    if frame.empty:
        return empty_findings()
    g = frame[frame["run_id"].notna()]
    spinning = _spinning(g, thresholds)
    # a run none of whose GPUs spins in the frame cannot reach the share: only the others are grouped
    g = suspects(g, spinning, ["run_id"]) if thresholds["min_share"] > 0 else g.assign(_entry=spinning)
    if g.empty:
        return empty_findings()
    g = g.rename(columns={"_entry": "spinning"})
    g["gpu"] = g["host"].astype(str) + ":" + g["gpu_index"].astype(int).astype(str)
    for column in ("power_watts", "power_limit_watts", "power_watts_baseline", "tensor_active_ratio", "sm_active_ratio"):
        g[column] = pd.to_numeric(g[column], errors="coerce")   # a source without the field: NaN, not None
    limit = g["power_limit_watts"].where(g["power_limit_watts"] > 0)
    power_ratio = g["power_watts"] / limit                   # NaN without a limit: not judged
    baseline = g["power_watts_baseline"]
    worked = baseline.gt(thresholds["max_power_ratio"] * limit)   # its own loaded history testifies
    from_history = worked & g["power_watts"].le(thresholds["max_power_drop"] * baseline)
    from_physics = ~worked & (
        power_ratio.le(thresholds["max_cold_power_ratio"]) | g["sm_active_ratio"].le(thresholds["max_spin_sm_active"])
    )
    g["dropped"] = g["spinning"] & (from_history | from_physics)
    g["cold"] = g["spinning"] & from_physics
    g["power_ratio"] = power_ratio
    g["spin_draw"] = g["spinning"] & power_ratio.le(thresholds["max_cold_power_ratio"])
    g["stalled"] = _steps_stalled(g, thresholds["stall_log_intervals"])
    g["last_step"] = pd.to_datetime(g["run_last_step_time"]) if "run_last_step_time" in g.columns else pd.NaT
    per_run = g.groupby(["run_id", "tick"], sort=True).agg(
        gpus_held=("gpu", "size"), spinning=("spinning", "sum"), dropped=("dropped", "sum"), cold=("cold", "sum"),
        utilization=("utilization_ratio", "mean"), power_ratio=("power_ratio", "mean"),
        tensor=("tensor_active_ratio", "mean"), in_window=("in_window", "any"),
        spin_draw=("spin_draw", "sum"), stalled=("stalled", "all"), last_step=("last_step", "max"),
        **({"episode_last_seen": ("episode_last_seen", "first")} if "episode_last_seen" in g.columns else {}),
    ).reset_index()
    share = per_run["spinning"] / per_run["gpus_held"]
    sustain = share.ge(thresholds["min_share"])
    entry = sustain & (per_run["dropped"] / per_run["gpus_held"]).ge(thresholds["min_share"])
    f = mark_stretches(per_run, "run_id", entry, sustain=sustain, min_minutes=thresholds["min_minutes"])
    # the two witnesses together: every held GPU at a spin's draw and the steps stopped (a subset of
    # `sustain`, so both marks share their stretches)
    witnessed = per_run["spin_draw"].eq(per_run["gpus_held"]) & per_run["stalled"]
    fast = mark_stretches(per_run, "run_id", witnessed & sustain, sustain=sustain,
                          min_minutes=thresholds["fast_min_minutes"])
    f["_fast"] = fast["_active"] & ~f["_active"]
    f["_active"] = f["_active"] | fast["_active"]
    spin = g[g["spinning"]]
    rows = []
    for stretch, active in active_stretches(f):
        run_id = active["run_id"].iloc[0]
        mine = spin[(spin["run_id"] == run_id) & spin["tick"].between(active["tick"].iloc[0], active["tick"].iloc[-1])]
        gpus = sorted(set(mine["gpu"]))
        rows.append(finding(
            entity_id=run_id, onset=stretch["tick"].iloc[0] - MINUTE, detected_at=active["tick"].iloc[0],
            last_seen=active["tick"].iloc[-1], run_id=run_id, hosts=sorted(set(mine["host"].astype(str))), gpus=gpus,
            value=100 * active["power_ratio"].mean(), baseline=None, threshold=100 * thresholds["max_power_ratio"],
            evidence={
                "spinning_gpus": len(gpus),
                "gpus_held": int(active["gpus_held"].max()),
                "minutes": int(len(active)),
                "utilization_pct": num(100 * active["utilization"].mean(), 1),
                "power_pct_of_limit": num(100 * active["power_ratio"].mean(), 1),
                "tensor_active_pct": num(100 * active["tensor"].mean(), 1),
                "judged_by": "its GPUs' own history: power fell from a working draw"
                             if (active["dropped"] > active["cold"]).any() else "physics: no loaded history to compare with",
                "opened_by": f"every GPU at a spin's draw with its steps stopped for {thresholds['fast_min_minutes']:g} min"
                             if active["_fast"].iloc[0] else f"{thresholds['min_minutes']:g} min of spinning",
                "last_step": timestamp(active["last_step"].iloc[0]),
            },
        ))
    return findings_frame(rows)


def _spinning(g: pd.DataFrame, thresholds: Mapping[str, float]) -> pd.Series:
    """Per GPU row: at full utilization under `max_power_ratio` of its (known) limit, the tensor pipes idle
    where profiled."""
    limit = pd.to_numeric(g["power_limit_watts"], errors="coerce")
    tensor = pd.to_numeric(g["tensor_active_ratio"], errors="coerce")
    return (g["utilization_ratio"].ge(thresholds["min_utilization"])
            & (pd.to_numeric(g["power_watts"], errors="coerce") / limit.where(limit > 0)).le(thresholds["max_power_ratio"])
            & (tensor.isna() | tensor.le(thresholds["max_tensor_active"])))


def _steps_stalled(g: pd.DataFrame, log_intervals: float) -> pd.Series:
    """Per row: its run logged no step in that minute, nor for `log_intervals` of its own logging
    interval. False where the run logs no steps or its cadence is unknown (nothing to witness)."""
    if "run_last_step_time" not in g.columns:
        return pd.Series(False, index=g.index)
    last = pd.to_datetime(g["run_last_step_time"])
    silent = (pd.to_datetime(g["tick"]) - last).dt.total_seconds()
    cadence = pd.to_numeric(g["log_interval_seconds"], errors="coerce")
    return last.notna() & last.lt(pd.to_datetime(g["minute"])) & cadence.gt(0) & silent.ge(log_intervals * cadence)
