"""A GPU with no samples for a whole hour is "not judged (no samples this hour)" (issue 17 item 2),
when the hour expected it: seen in the hour before, or named by a live run's lineage. Its look-alike, a
GPU decommissioned (gone from the previous hour and from every live run's lineage), is not listed."""

from __future__ import annotations

import json

import pandas as pd

from assets.baselines import series_params
from checks.asset_checks import evaluate_judged
from checks.judgement_absent import NO_SAMPLES
from checks.registry import REGISTRY
from orchestration.storage import sql
from tests.detector_frames import T0, warehouse_of

THERMAL = REGISTRY.get("gpu_thermal_throttle")


def _samples(gpu: int, start: pd.Timestamp, end: pd.Timestamp) -> pd.DataFrame:
    t = pd.date_range(start, end, freq="10s", inclusive="left")
    return pd.DataFrame({"time": t, "host": "n", "gpu_index": gpu, "gpu_uuid": f"GPU-n-{gpu}", "run_id": None,
                         "utilization_ratio": 0.95, "sm_clock_hertz": 1.9e9, "throttle_reasons": 0,
                         "temperature_celsius": 60.0, "power_watts": 500.0, "power_limit_watts": 700.0,
                         "source_file": "n.jsonl", "source_line": 1})


def _lineage(time, event, run_id, **payload) -> dict:
    return {"time": time, "event": event, "run_id": run_id, "payload": json.dumps({"event": event, "run_id": run_id, **payload}),
            "source_file": "lineage.jsonl", "source_line": 1}


def _judgements(con, start: pd.Timestamp) -> pd.DataFrame:
    return con.execute("SELECT * FROM judgements WHERE signal = $s AND partition_start = $p",
                       {"s": THERMAL.name, "p": start}).df().set_index("entity_id")


def test_a_gpu_silent_for_the_hour_is_listed_not_judged_and_a_decommissioned_one_is_not():
    before, hour = T0 - pd.Timedelta("1h"), T0
    rows = pd.concat([
        _samples(0, before - pd.Timedelta("1h"), hour + pd.Timedelta("1h")),   # healthy throughout
        _samples(1, before - pd.Timedelta("1h"), hour),                         # telemetry gap covering the hour
        _samples(2, before - pd.Timedelta("1h"), before),                       # decommissioned an hour before
        _samples(4, before - pd.Timedelta("1h"), before),                       # its run ended before the hour
    ], ignore_index=True)
    lineage = pd.DataFrame([
        _lineage(before + pd.Timedelta("10min"), "run_started", "live", gpus=["n:0", "n:3"]),   # n:3: no exporter yet
        _lineage(before - pd.Timedelta("2h"), "run_started", "old", gpus=["n:4"]),
        _lineage(before - pd.Timedelta("30min"), "run_ended", "old", status="completed"),
    ])
    with warehouse_of(gpu_samples=rows, lineage_events=lineage) as con:
        for start in (before - pd.Timedelta("1h"), before, hour):
            sql.run(con, "baselines/gpu_minutes", series_params(start, start + pd.Timedelta("1h"), 30))
        for start in (before, hour):
            evaluate_judged(con, THERMAL, start.to_pydatetime(), (start + pd.Timedelta("1h")).to_pydatetime())
        now, earlier = _judgements(con, hour), _judgements(con, before)
    assert now.loc["n:0", "judged"] and now.loc["n:0", "judged_minutes"] == 60
    assert not now.loc["n:1", "judged"] and now.loc["n:1", "minutes"] == 0
    assert now.loc["n:1", "reason"] == f"{NO_SAMPLES} (seen in the hour before)"
    assert now.loc["n:3", "reason"] == f"{NO_SAMPLES} (named by run live's lineage)"
    assert "n:2" not in now.index and "n:4" not in now.index        # gone from the last hour and every live run
    # the hour before: n:2 and n:4 were seen two hours back, so they are listed once, then no more
    assert earlier.loc["n:2", "reason"] == f"{NO_SAMPLES} (seen in the hour before)"
    assert earlier.loc["n:1", "judged"] and "n:1" in earlier.index


def test_a_gpu_with_samples_for_part_of_the_hour_keeps_its_minutes():
    """A 15-minute gap is not an absence: 45 minutes present, judged, no 'no samples' row."""
    rows = pd.concat([_samples(0, T0 - pd.Timedelta("2h"), T0 + pd.Timedelta("15min")),
                      _samples(0, T0 + pd.Timedelta("30min"), T0 + pd.Timedelta("1h"))], ignore_index=True)
    with warehouse_of(gpu_samples=rows) as con:
        for start in (T0 - pd.Timedelta("2h"), T0 - pd.Timedelta("1h"), T0):
            sql.run(con, "baselines/gpu_minutes", series_params(start, start + pd.Timedelta("1h"), 30))
        evaluate_judged(con, THERMAL, T0.to_pydatetime(), (T0 + pd.Timedelta("1h")).to_pydatetime())
        now = _judgements(con, T0)
    assert list(now.index) == ["n:0"] and now.loc["n:0", "minutes"] == 45 and now.loc["n:0", "judged"]
