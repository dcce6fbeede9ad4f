"""Small pure detectors: each takes its signal's time-series frame and thresholds and returns
findings (one row per contiguous flagged stretch), in the columns of `registry.FINDING_COLUMNS`.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from checks.toolkit import empty_findings, finding, findings_frame, num

__all__ = ["busy_not_progressing", "empty_findings"]


def busy_not_progressing(frame: pd.DataFrame, thresholds: Mapping[str, float]) -> pd.DataFrame:
    """A run whose GPUs stay busy while it completes no step.

    At each tick the stall is the time since the run last completed a step (or since it started,
    if it never has). It is flagged when the stall exceeds both `min_stall_seconds` and
    `stall_factor` times the run's own typical step interval (so a run with slow steps is judged
    by its own clock), while its GPUs' mean utilization stays at or above `min_utilization`.
    Checkpoint saves and data stalls idle the GPUs and so are not flagged; a run whose GPUs were
    released (idle between runs) is not in the frame at all.
    """
    if frame.empty:
        return empty_findings()
    f = frame.copy()
    # The stall clock starts at the last completed step, or at a (re)start after it.
    started = f["run_started"].where(f["run_started"] <= f["tick"])
    since = pd.concat([f["last_progress"], started], axis=1).max(axis=1)
    f["onset"] = since
    f["stall_seconds"] = (f["tick"] - since).dt.total_seconds()
    step_interval = f["step_interval_seconds"].astype(float)
    f["threshold"] = np.fmax(thresholds["min_stall_seconds"], thresholds["stall_factor"] * step_interval)
    f["flagged"] = (
        f["stall_seconds"].ge(f["threshold"])
        & f["utilization_mean"].ge(thresholds["min_utilization"])
        & f["onset"].notna()
    )
    hits = f[f["flagged"]]
    if hits.empty:
        return empty_findings()
    rows = []
    for (run_id, onset), g in hits.groupby(["run_id", "onset"], sort=True):
        last = g.iloc[-1]
        gpus = sorted(set().union(*g["gpus"]))
        hosts = sorted(set().union(*g["hosts"]))
        rows.append(finding(
            entity_id=run_id, onset=onset, detected_at=g["tick"].min(), last_seen=g["tick"].max(),
            run_id=run_id, hosts=hosts, gpus=gpus,
            value=g["stall_seconds"].max(), baseline=last["step_interval_seconds"], threshold=g["threshold"].iloc[0],
            evidence={
                "last_step": num(last["last_step"], 0),
                "last_progress": onset.isoformat(),
                "stall_minutes": num(g["stall_seconds"].max() / 60, 1),
                "utilization_pct": num(100 * g["utilization_mean"].mean(), 1),
                "step_interval_seconds": num(last["step_interval_seconds"], 3),
                "gpu_count": len(gpus),
            },
        ))
    return findings_frame(rows)
