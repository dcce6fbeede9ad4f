"""Detectors as pure functions: for each, a case it must flag and cases it must not."""

import pandas as pd
import pytest

import checks.signals  # noqa: F401
from checks.detectors import busy_not_progressing
from checks.registry import REGISTRY

T0 = pd.Timestamp("2026-11-30 10:00:00")
THRESHOLDS = REGISTRY.get("busy_not_progressing").thresholds


def series(minutes=60, step_interval=2.0, stall_from=None, util=0.97, util_during_stall=None, started=T0 - pd.Timedelta("1h")):
    """A run's per-minute progress series: steps every `step_interval` s until `stall_from` minutes."""
    rows = []
    for m in range(1, minutes + 1):
        tick = T0 + pd.Timedelta(minutes=m)
        stalled = stall_from is not None and m > stall_from
        last = T0 + pd.Timedelta(minutes=stall_from) if stalled else tick - pd.Timedelta(seconds=step_interval / 2)
        rows.append({
            "run_id": "run-a", "tick": tick,
            "utilization_mean": util_during_stall if stalled and util_during_stall is not None else util,
            "samples": 120, "hosts": ["node-0"], "gpus": ["node-0:0", "node-0:1"],
            "last_progress": last, "last_step": 1000, "run_started": started,
            "step_interval_seconds": step_interval, "baseline_steps": 1000,
        })
    return pd.DataFrame(rows)


def test_flags_a_hang_with_busy_gpus():
    found = busy_not_progressing(series(stall_from=20), THRESHOLDS)
    assert len(found) == 1
    row = found.iloc[0]
    assert row["entity_id"] == "run-a"
    assert row["onset"] == T0 + pd.Timedelta(minutes=20)
    # flagged once the stall reaches max(5 min, 20 x 2 s) = 5 min
    assert row["detected_at"] == T0 + pd.Timedelta(minutes=25)
    assert row["last_seen"] == T0 + pd.Timedelta(minutes=60)
    assert row["evidence"]["gpu_count"] == 2


@pytest.mark.parametrize("case", [
    dict(),                                                      # healthy run
    dict(stall_from=20, util_during_stall=0.05),                 # GPUs idle while stalled: checkpoint save / data wait
    dict(stall_from=57),                                         # a 3-minute pause: below several minutes
    dict(step_interval=60.0, stall_from=50),                     # 10 min without a step, but steps take 60 s: < 20 steps
])
def test_quiet_when_progressing_or_not_busy(case):
    assert busy_not_progressing(series(**case), THRESHOLDS).empty


def test_quiet_on_no_runs():
    assert busy_not_progressing(series().iloc[0:0], THRESHOLDS).empty


def test_a_restart_resets_the_stall_clock():
    frame = series(stall_from=10)
    frame["run_started"] = T0 + pd.Timedelta(minutes=58)   # relaunched: the clock restarts at launch
    frame["utilization_mean"] = 0.97
    found = busy_not_progressing(frame, THRESHOLDS)
    assert len(found) == 1 and found.iloc[0]["last_seen"] < T0 + pd.Timedelta(minutes=58)
