"""A simulated hang draws what the real one drew (issue 17's hang power fidelity).

The real capture (tests/fixtures/h200_hang: an H200 whose trainer hung with a spin kernel resident)
drew ~17 % of its power limit at full utilization while hung. The simulator's hung GPUs must draw
about the same share, and a hang already in progress when Goodput starts watching (no loaded
history to compare with) must then be found from the physics, as on the real capture."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from statistics import median

import duckdb
import pandas as pd

from tests.conftest import run_detect

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


def test_a_simulated_hang_in_progress_when_watching_starts_is_found(small_raw_zone, tmp_path, instance):
    """The raw zone cut so that the first GPU sample and step record are 5 minutes into the hang."""
    shutil.copytree(small_raw_zone, tmp_path, dirs_exist_ok=True, symlinks=True)
    cut = ONSET + pd.Timedelta(minutes=5)
    for source in ("gpu_samples", "training_steps"):
        for path in (tmp_path / "raw" / source).rglob("*.jsonl"):
            lines = path.read_text().splitlines(keepends=True)
            path.write_text("".join(line for line in lines if line.strip() and _time(json.loads(line)) >= cut))
    run_detect(tmp_path, "2026-11-30-01:00", instance)
    with duckdb.connect(str(tmp_path / "warehouse.duckdb"), read_only=True) as con:
        found = con.execute("SELECT signal, run_id, onset FROM findings WHERE signal = 'gpu_busy_low_power'").fetchall()
    assert [(signal, run) for signal, run, _ in found] == [("gpu_busy_low_power", "llm-small")]
    assert found[0][2] <= (END - pd.Timedelta(minutes=5)).to_pydatetime()
