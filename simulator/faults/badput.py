"""Badput faults (docs/scenario.md, "Badput shapes"): GPU time spent without a fault a training
detector would name, such as a kernel regression that lowers model FLOPs utilization."""

from __future__ import annotations

from ..physics import COMPUTE_SHARE
from .registry import FaultEffect, Slowdown, register


def _mfu(scenario, run, f, step_time, progress):
    if f.run_id != run.id:
        return []
    # a kernel regression: every rank computes slower
    return [Slowdown("compute", progress(f.onset), progress(f.end), f.magnitude * COMPUTE_SHARE * step_time, r)
            for r in range(run.ranks)]


register(FaultEffect(
    "mfu_regression", "badput", ("run",),
    "a kernel or parallelism regression: every rank's compute_seconds grow by magnitude x 0.8 x step time; "
    "the run keeps stepping with the same tokens, so its model FLOPs utilization drops", slowdown=_mfu))
