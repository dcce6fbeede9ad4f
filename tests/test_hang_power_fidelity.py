"""A simulated hang draws what the real one drew (issue 17's hang power fidelity).

The real capture (tests/fixtures/h200_hang: an H200 whose trainer hung with a spin kernel resident)
drew ~17 % of its power limit at full utilization while hung. The simulator's hung GPUs must draw
about the same share, and a hang already in progress when Goodput starts watching (no loaded
history to compare with) must then be found from the physics, as on the real capture."""

from __future__ import annotations

import json
from pathlib import Path
from statistics import median

import pandas as pd

import checks.signals  # noqa: F401  (registers the signals)
from assets.baselines import series_params
from checks.registry import REGISTRY
from orchestration.storage import sql
from tests.detector_frames import warehouse_of

CAPTURE = json.loads((Path(__file__).parent / "fixtures" / "h200_hang" / "truth.json").read_text())
ONSET = pd.Timestamp("2026-11-30 00:50")   # small.yaml's hang: 00:50-01:10 on run llm-small
END = pd.Timestamp("2026-11-30 01:10")


def _records(home: Path, source: str) -> list[dict]:
    return [json.loads(line) for path in sorted((home / "raw" / source).rglob("*.jsonl"))
            for line in path.read_text().splitlines() if line.strip()]


def _time(record: dict) -> pd.Timestamp:
    return pd.Timestamp(record["time"]).tz_localize(None)


def _capture_share() -> float:
    hang = CAPTURE["phases"]["hang"]
    return hang["power_watts_mean"] / 700.0   # the H200's power limit in the capture's samples


def test_simulated_hung_gpus_draw_the_real_captures_share_of_their_limit(small_raw_zone):
    hung = [r for r in _records(small_raw_zone, "gpu_samples") if ONSET <= _time(r) < END and r["run_id"] == "llm-small"]
    shares = [r["power_watts"] / r["power_limit_watts"] for r in hung]
    assert len(shares) >= 200 and all(r["utilization_ratio"] >= 0.97 for r in hung)
    real = _capture_share()
    assert 0.15 < real < 0.19                                   # the capture itself: ~17 % at 100 % utilization
    assert abs(median(shares) - real) <= 0.02
    assert min(shares) <= real + 0.005 and max(shares) <= real + 0.04


def test_a_simulated_hang_in_progress_when_watching_starts_is_found(small_raw_zone):
    """The simulated GPU samples from 5 minutes into the hang on (nothing before: no loaded history),
    through the real GPU baselines and detect SQL: gpu_busy_low_power must judge from physics."""
    cut = ONSET + pd.Timedelta(minutes=5)
    rows = pd.DataFrame([r for r in _records(small_raw_zone, "gpu_samples") if _time(r) >= cut])
    rows["time"] = pd.to_datetime(rows["time"]).dt.tz_localize(None)
    rows["source_file"], rows["source_line"] = "node-0.jsonl", 1
    signal = REGISTRY.get("gpu_busy_low_power")
    hour = pd.Timestamp("2026-11-30 01:00")
    with warehouse_of(gpu_samples=rows) as con:
        for start in (hour - pd.Timedelta("1h"), hour):     # the GPU baselines, as the baselines asset builds them
            sql.run(con, "baselines/gpu_minutes", series_params(start, start + pd.Timedelta("1h"), 30))
        frame = sql.frame(con, signal.query, {"start": hour, "end": hour + pd.Timedelta("1h"), **signal.thresholds})
    found = signal.detector(frame, dict(signal.thresholds)).to_dict("records")
    assert [f["run_id"] for f in found] == ["llm-small"]
    assert found[0]["onset"] <= END - pd.Timedelta(minutes=5)
