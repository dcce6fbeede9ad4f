"""A straggler slows a synchronous job's pace; the step-time regression must leave that to the
straggler signal and still find a regression of every rank's own work that happens beside it.

Per-rank step records of a synchronous job go through the real baselines (rank_minutes,
run_minutes) and the detect SQL, then the step_time_regression detector. Each step takes 2 s
(0.02 s data, 1.6 s compute, the rest collective); from minute 150 one rank computes `straggle`
seconds longer (its peers wait that long in the collective) and, in the look-alike that must be
flagged, every rank's own compute also grows by `regression` seconds (a slower kernel)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import checks.signals  # noqa: F401  (registers the signals)
from assets.baselines import replace_series
from checks.registry import REGISTRY
from orchestration.storage import sql
from tests.detector_frames import warehouse_of

T0 = pd.Timestamp("2026-11-30 00:00")
CHANGE, END = 150, 180   # minutes


def _findings(ranks: int, straggle: float, regression: float) -> pd.DataFrame:
    rng = np.random.default_rng(ranks)
    step = 2.0 + straggle + regression
    t = np.concatenate([np.arange(0.0, CHANGE * 60, 2.0), np.arange(CHANGE * 60, END * 60, step)])
    late = (t >= CHANGE * 60)[:, None]
    r = np.arange(ranks)[None, :]
    compute = 1.6 * rng.lognormal(0.0, 0.005, (len(t), ranks)) + np.where(late, regression, 0.0)
    compute = compute + np.where(late & (r == ranks - 1), straggle, 0.0)
    step_s = compute.max(axis=1, keepdims=True) + 0.02 + 0.38    # everyone waits for the slowest
    steps = pd.DataFrame({
        "time": np.repeat(T0 + pd.to_timedelta(t, unit="s"), ranks), "run_id": "job", "rank": np.tile(r[0], len(t)),
        "world_size": ranks, "host": "node-0", "gpu_index": np.tile(r[0], len(t)),
        "step": np.repeat(np.arange(len(t)), ranks), "step_seconds": np.repeat(step_s[:, 0], ranks),
        "data_seconds": 0.02, "compute_seconds": compute.ravel(),
        "collective_seconds": (step_s - 0.02 - compute).ravel(), "source_file": "job.jsonl", "source_line": 1,
    })
    thresholds = dict(REGISTRY.get("step_time_regression").thresholds)
    with warehouse_of(training_steps=steps) as con:
        for hour in range(3):
            start = T0 + pd.Timedelta(hours=hour)
            replace_series(con, "training_steps", ("run_minutes", "rank_minutes"), start, start + pd.Timedelta(hours=1), 30,
                           live=False)
        start = T0 + pd.Timedelta(hours=2)
        minutes = sql.frame(con, "detect/training_run_minutes",
                            {"start": start, "end": start + pd.Timedelta(hours=1), **thresholds})
    return REGISTRY.get("step_time_regression").detector(minutes, thresholds)


@pytest.mark.parametrize("ranks", [2, 8])
def test_a_straggler_alone_is_no_step_time_regression(ranks):
    """One rank computes twice as long: the pace grows 80 %, all of it the straggler's."""
    assert _findings(ranks, straggle=1.6, regression=0.0).empty


@pytest.mark.parametrize("ranks", [2, 8])
def test_a_regression_of_every_rank_beside_a_straggler_is_flagged(ranks):
    """The same straggler, and every rank's compute 0.4 s (20 % of the step) slower from the same minute."""
    (finding,) = _findings(ranks, straggle=1.6, regression=0.4).to_dict("records")
    assert T0 + pd.Timedelta(minutes=CHANGE) <= finding["onset"] <= T0 + pd.Timedelta(minutes=CHANGE + 1)
    ev = finding["evidence"]
    assert ev["straggler_seconds"] == pytest.approx(1.6, rel=0.05)
    assert ev["own_pace_seconds"] == pytest.approx(2.4, rel=0.03)
    assert ev["step_seconds"] == pytest.approx(4.0, rel=0.03)     # the pace, straggler included


def test_a_regression_without_a_straggler_is_flagged_as_before():
    (finding,) = _findings(8, straggle=0.0, regression=0.4).to_dict("records")
    assert finding["evidence"]["straggler_seconds"] == pytest.approx(0.0, abs=0.02)
