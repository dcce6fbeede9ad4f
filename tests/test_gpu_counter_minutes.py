"""The GPU counter signals (gpu_xid_error, gpu_xid_fatal, gpu_ecc_error) read `gpu_counter_minutes` (each counter's
first and last reading and its rises within each minute, written by the GPU baselines) instead of walking a window
function over every GPU sample of the hour so far and its lookback: a tick reads a row per GPU and minute. The frames
must be exactly what the sample-reading queries gave (tests/fixtures/<signal>_from_samples.sql).

Random samples exercise what the previous reading decides: counters rising, dropping (a driver reload), missing
(NULL) on some samples, a row remap turning pending, a GPU silent for longer than the lookback, and GPUs that only
appear inside the hour; hours before, inside and after the data, with the default lookback and shorter ones."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from checks.registry import REGISTRY
from orchestration.storage import sql
from tests.detector_frames import T0, gpu_series, warehouse_of

REPO = Path(__file__).resolve().parent.parent
COUNTERS = ("xid_errors_total", "ecc_uncorrected_errors_total", "ecc_corrected_errors_total",
            "remapped_rows_uncorrectable_total")


def random_samples(seed: int) -> pd.DataFrame:
    """Ten GPUs sampled at random 10-second moments from T0 - 150 min to T0 + 60 min (no two at one moment on a GPU)."""
    rng = np.random.default_rng(seed)
    grid = pd.date_range(T0 - pd.Timedelta(minutes=150), T0 + pd.Timedelta(minutes=60), freq="10s", inclusive="left")
    parts = []
    for gpu in range(10):
        keep = rng.random(len(grid)) < rng.uniform(0.05, 0.6)
        if gpu % 5 == 1:      # silent for longer than any lookback before the second hour
            keep &= (grid < T0 - pd.Timedelta(minutes=120)) | (grid >= T0)
        if gpu % 5 == 2:      # appears only inside the last hour
            keep &= grid >= T0 + pd.Timedelta(minutes=int(rng.integers(0, 40)))
        t = grid[keep]
        n = len(t)
        frame = pd.DataFrame({"time": t, "host": f"node-{gpu // 4}", "gpu_index": gpu % 4, "gpu_uuid": f"GPU-{gpu}",
                              "run_id": rng.choice(["run-a", "run-b"], n), "source_file": "test",
                              "source_line": range(n)})
        for column in COUNTERS:
            steps = np.where(rng.random(n) < 0.03, rng.integers(1, 4, n), 0)
            level = int(rng.integers(0, 5)) + np.cumsum(steps)
            reset = np.flatnonzero(rng.random(n) < 0.004)       # a driver reload restarts the counter
            for at in reset:
                level[at:] -= level[at] - int(rng.integers(0, 2))
            values = pd.array(level, dtype="Int64")
            values[rng.random(n) < 0.15] = pd.NA                # the exporter skipped it on this sample
            frame[column] = values
        last_xid = pd.array(rng.choice([13, 31, 48, 79], n), dtype="Int32")
        last_xid[rng.random(n) < 0.3] = pd.NA                   # no XID reported on this sample
        frame["last_xid"] = last_xid
        pending = pd.array(np.cumsum(rng.random(n) < 0.01) % 2 == 1, dtype="boolean")
        pending[rng.random(n) < 0.15] = pd.NA
        frame["row_remap_pending"] = pending
        frame["row_remap_failure"] = pd.array(rng.random(n) < 0.01, dtype="boolean")
        parts.append(frame)
    return pd.concat(parts, ignore_index=True)


@pytest.mark.parametrize("seed", range(4))
def test_the_counter_frames_from_counter_minutes_equal_the_ones_from_every_sample(seed):
    rows = random_samples(seed)
    compared = rose_over_an_earlier_minute = 0
    with warehouse_of(gpu_samples=rows) as con:
        gpu_series(con)
        for name in ("gpu_xid_error", "gpu_ecc_error"):
            signal = REGISTRY.get(name)
            old = (REPO / "tests" / "fixtures" / f"{name}_from_samples.sql").read_text()
            for hour in (-3, -2, -1, 0):        # before the data, across its start, and the hours with data before them
                start = (T0 + pd.Timedelta(hours=hour)).to_pydatetime()
                for lookback in (signal.thresholds["lookback_minutes"], 25, 0):
                    params = {**signal.thresholds, "start": start, "end": start + pd.Timedelta(hours=1),
                              "lookback_minutes": lookback}
                    now = sql.frame(con, signal.query, params)
                    pd.testing.assert_frame_equal(now, sql.execute_text(con, old, params).df())
                    compared += len(now)
                    first = now[now["minute"] == now.groupby(["host", "gpu_index"])["minute"].transform("min")]
                    column = "xid_increase" if name == "gpu_xid_error" else "uncorrected_increase"
                    rose_over_an_earlier_minute += int((first[column] > 0).sum())
    # not vacuous: rows compared, and first minutes whose increase is over a reading before the hour
    assert compared > 1000 and rose_over_an_earlier_minute > 0
