"""The benchmarks' quick modes keep working (no timing assertions), and the baseline rules fire
when, and only when, their generic condition holds."""

import json
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest

from bench.baseline import BASELINE, evaluate
from orchestration.evaluation.scoring import score
from orchestration.storage.warehouse import WarehouseResource

REPO = Path(__file__).resolve().parent.parent
T0 = datetime(2026, 11, 30)


def _bench(script: str, *args: str) -> str:
    done = subprocess.run([sys.executable, str(REPO / "bench" / script), *args], cwd=REPO,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_detection_quick_finds_the_hang_sooner_than_the_threshold_rules(tmp_path):
    out = tmp_path / "detection.json"
    text = _bench("bench_detection.py", "--quick", "--out", str(out))
    assert "## Per fault type: Goodput vs generic threshold rules" in text
    rows = {r["fault type"]: r for r in json.loads(out.read_text())["table"]}
    hang = rows["hang"]
    assert hang["injected"] == 1 and hang["Goodput recall"] == "1.00"
    # a hang keeps the GPUs busy: only log silence catches it, and only after its 10 minutes
    assert hang["baseline recall"] == "1.00"
    assert float(hang["baseline delay p50 (min)"]) >= 10.0 > float(hang["Goodput delay p50 (min)"])
    assert "baseline_no_log_10m" in text and "| quick" in text
    assert rows["xid_error"]["Goodput recall"] == "1.00" and rows["xid_error"]["baseline recall"] == "1.00"


def test_scale_quick(tmp_path):
    """bench_scale.py's quick sizes, each one bench_tick.py run (the tick bench's own quick check too)."""
    out = tmp_path / "scale.json"
    text = _bench("bench_scale.py", "--quick", "--out", str(out))
    result = json.loads(out.read_text())
    assert set(result) == {"8", "16"}
    # twice the GPUs, twice the samples: the table's growth columns compare like with like
    assert result["16"]["counts"]["gpu_samples"] == 2 * result["8"]["counts"]["gpu_samples"]
    assert "x time" in text and "peak RSS MiB" in text
    for tick in result.values():
        stages = [row["stage"].strip() for row in tick["rows"]]
        assert tick["counts"]["training_steps"] > 0 and tick["tick_seconds"] > 0
        assert "reference read_json+INSERT training_steps" in stages
        # the dirty-hour path is measured too
        assert "line-by-line parse training_steps (an hour with a bad line)" in stages


def _gpu_rows(minutes: int, gpu: int = 0, run_id: str | None = "r", util: float = 0.9, temp: float = 60.0,
              memory: float = 0.5, xid: list[int] | None = None, start: int = 0) -> list[dict]:
    return [{
        "time": T0 + timedelta(minutes=start, seconds=10 * i), "host": "node-0", "gpu_index": gpu, "run_id": run_id,
        "utilization_ratio": util, "memory_used_bytes": int(memory * 80e9), "memory_total_bytes": int(80e9),
        "temperature_celsius": temp, "xid_errors_total": (xid[i] if xid else 0),
        "source_file": "test", "source_line": i,
    } for i in range(minutes * 6)]


@pytest.fixture
def warehouse(tmp_path):
    return WarehouseResource(path=str(tmp_path / "w.duckdb"))


def _load(con, table: str, rows: list[dict]) -> None:
    frame = pd.DataFrame(rows)  # noqa: F841  (read by name in the SQL below)
    cols = ", ".join(pd.DataFrame(rows).columns)
    con.execute(f"INSERT INTO {table} ({cols}) SELECT {cols} FROM frame")


def test_gpu_threshold_rules_fire_only_once_their_duration_has_passed(warehouse):
    xid = [0] * 60 + [2] * 60
    rows = (_gpu_rows(12, gpu=0, util=0.02)                     # idle 12 min on a run's GPU: fires
            + _gpu_rows(8, gpu=1, util=0.02)                    # idle 8 min: too short
            + _gpu_rows(30, gpu=2, util=0.0, run_id=None)       # idle, no run: not "held by a run"
            + _gpu_rows(6, gpu=3, temp=90.0) + _gpu_rows(6, gpu=3, start=6)   # hot 6 min: fires
            + _gpu_rows(3, gpu=4, temp=90.0, memory=0.97)       # hot and full for 3 min: too short
            + _gpu_rows(20, gpu=5, xid=xid))                    # XID counter 0 -> 2 at 10 min: fires
    with warehouse.connect() as con:
        _load(con, "gpu_samples", rows)
        alerts = evaluate(con)
    fired = sorted(zip(alerts["signal"], alerts["entity_id"]))
    assert fired == [("baseline_any_xid", "node-0:5"), ("baseline_temp_85", "node-0:3"),
                     ("baseline_util_low_10m", "node-0:0"),
                     # the dashboard variant also flags the idle GPU that no run holds
                     ("baseline_util_low_any_10m", "node-0:0"), ("baseline_util_low_any_10m", "node-0:2")]
    util = alerts[alerts["signal"] == "baseline_util_low_10m"].iloc[0]
    assert util["opened"] - util["onset"] == pd.Timedelta(minutes=10)
    xid_alert = alerts[alerts["signal"] == "baseline_any_xid"].iloc[0]
    assert xid_alert["onset"] == pd.Timestamp(T0 + timedelta(minutes=10))


def test_no_log_rule_fires_on_ten_silent_minutes_not_on_an_evaluation_pause(warehouse):
    steps = [{"time": T0 + timedelta(seconds=2 * i), "run_id": "r", "rank": 0, "step": i,
              "source_file": "test", "source_line": i} for i in range(300)]            # 00:00-00:10
    steps += [{"time": T0 + timedelta(minutes=13, seconds=2 * i), "run_id": "r", "rank": 0, "step": 300 + i,
               "source_file": "test", "source_line": 300 + i} for i in range(300)]     # 3-minute pause
    steps += [{"time": T0 + timedelta(minutes=35, seconds=2 * i), "run_id": "r", "rank": 0, "step": 600 + i,
               "source_file": "test", "source_line": 600 + i} for i in range(300)]     # 12-minute silence
    with warehouse.connect() as con:
        _load(con, "training_steps", steps)
        alerts = evaluate(con)
    assert list(alerts["signal"]) == ["baseline_no_log_10m"]
    alert = alerts.iloc[0]
    last = pd.Timestamp(T0 + timedelta(minutes=13, seconds=598))
    assert alert["onset"] == last and alert["opened"] == last + pd.Timedelta(minutes=10)
    truth = pd.DataFrame([{"type": "hang", "entity": "run:r", "onset": last, "end": last + pd.Timedelta(minutes=12),
                           "magnitude": 1.0}])
    table = score(truth, alerts, registry=BASELINE).set_index("fault_type")
    assert table.loc["hang", "recall"] == 1.0 and table.loc["hang", "delay_median_s"] == 600.0


def test_backfill_quick(tmp_path):
    out = tmp_path / "backfill.json"
    text = _bench("bench_backfill.py", "--quick", "--home", str(tmp_path / "home"), "--out", str(out))
    result = json.loads(out.read_text())
    assert [r["success"] for r in result["rows"]] == [True, True]  # one hour, then fold_incidents
    assert result["counts"]["gpu_samples"] == 720 and result["counts"]["incidents"] >= 1  # the hang
    assert "s per partition p50" in text
