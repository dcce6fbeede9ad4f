"""bench/bench_replay.py's SEV1 delay in parts (issue 17, "SEV1 delay p50 <= 2 minutes in replay"):
the parts add up to the measured delay, and the windows around the faults of a tier merge when they
overlap and leave the other faults' minutes out."""

import importlib.util
from pathlib import Path

import pandas as pd
import pytest

from orchestration.evaluation.replay import ReplayResult

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_replay", REPO / "bench" / "bench_replay.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _at(hhmmss: str) -> pd.Timestamp:
    return pd.Timestamp(f"2026-11-30 {hhmmss}")


def test_the_parts_of_a_delay_add_up_to_it_and_name_a_tick_that_missed_it(bench):
    ticks = pd.DataFrame({"tick": pd.to_datetime([f"2026-11-30 00:{m}" for m in (26, 27, 28, 29)], utc=True),
                          "wall_s": [5.0, 6.0, 7.0, 8.0], "cpu_s": [4.0, 5.0, 6.0, 7.0]})
    # a hang from 00:25; its evidence complete at 00:27:30 (data time); the 00:28 tick could see it
    # but only the 00:29 tick did (a run in flight, late data): one extra minute
    faults = pd.DataFrame([{"type": "hang", "entity": "run:a", "onset": _at("00:25:00"), "end": _at("00:35:00"),
                            "tier": "SEV1", "signals": ["gpu_busy_low_power"], "first_seen": _at("00:29:08"),
                            "delay_s": 248.0},
                           {"type": "loss_spike", "entity": "run:a", "onset": _at("00:25:00"), "end": _at("00:35:00"),
                            "tier": "SEV3", "signals": ["loss_spike"], "first_seen": _at("00:29:08"), "delay_s": 248.0}])
    incidents = pd.DataFrame([{"incident_id": "i", "signal": "gpu_busy_low_power", "tier": "SEV1", "onset": _at("00:25:00"),
                               "opened": _at("00:27:30"), "first_seen": _at("00:29:08")}])
    result = ReplayResult(ticks=ticks, faults=faults, incidents=incidents, schedule="raw_zone_detect", cron="* * * * *",
                          latency={"gpu_samples": 10.0, "step_records": 2.0})
    (row,) = bench.delay_parts(result, "SEV1").to_dict("records")
    assert row["evidence (min)"] == pytest.approx(2.5)
    assert row["wait for tick (min)"] == pytest.approx(0.5) and row["extra ticks (min)"] == pytest.approx(1.0)
    parts = sum(row[k] for k in ("evidence (min)", "wait for tick (min)", "extra ticks (min)", "runs wall (min)"))
    assert parts == pytest.approx(row["delay (min)"]) == pytest.approx(248 / 60)
    assert row["delay, runs at CPU time (min)"] == pytest.approx((248 - 8 + 7) / 60)


def test_windows_merge_around_the_tier_faults_only(bench):
    truth = pd.DataFrame([{"type": "hang", "onset": _at("00:25:00")}, {"type": "hang", "onset": _at("00:29:00")},
                          {"type": "loss_spike", "onset": _at("01:00:00")}])
    assert bench.windows(truth, {"hang"}, 2, 6) == [(_at("00:23:00"), _at("00:35:00"))]
    assert bench.windows(truth, {"hang", "loss_spike"}, 1, 1) == [
        (_at("00:24:00"), _at("00:26:00")), (_at("00:28:00"), _at("00:30:00")), (_at("00:59:00"), _at("01:01:00"))]
    assert {"hang", "rank_dropout", "xid_error", "nan_loss"} <= bench.tier_fault_types("SEV1")
    assert "loss_spike" not in bench.tier_fault_types("SEV1")
