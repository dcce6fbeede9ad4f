"""Judged or not (issue 17 item 2): each evaluation records which entities its signal could judge and
why not the others (too little history, a missing field); the check, `goodput incidents` and the
analyst views say so, so that silence from a detector that could not look is never read as health."""

import html

import pandas as pd
import pytest

from assets.baselines import series_params
from checks import judgement
from checks.asset_checks import check_result, evaluate
from checks.registry import REGISTRY
from orchestration.cli import main
from orchestration.storage import sql
from orchestration.storage.warehouse import WarehouseResource
from tests.detector_frames import T0, gpu_frame, samples

THERMAL = REGISTRY.get("gpu_thermal_throttle")


def _judge(frame, signal=THERMAL):
    return judgement.judge(frame, signal.name, signal.entity, signal.entity_column, signal.thresholds)


def test_a_gpu_with_too_little_history_is_not_judged_and_one_with_history_is():
    fresh = gpu_frame(gpu=1, changes=[(-30, 60, {"baseline_minutes": 4})])     # watched for 4 minutes only
    old = gpu_frame(gpu=0)                                                     # the look-alike: 30 minutes of history
    judged = _judge(pd.concat([old, fresh], ignore_index=True)).set_index("entity_id")
    assert judged.loc["node-0:0", "judged"] and judged.loc["node-0:0", "judged_minutes"] == 60
    assert not judged.loc["node-0:1", "judged"] and judged.loc["node-0:1", "minutes"] == 60
    assert judged.loc["node-0:1", "reason"] == "too little history (< 10 baseline minutes)"


def test_a_missing_field_is_named_and_history_that_arrives_mid_hour_counts_from_then():
    blind = gpu_frame(gpu=2, changes=[(-30, 60, {"sm_clock_hertz": float("nan")})])   # an exporter without SM clocks
    growing = gpu_frame(gpu=3, changes=[(-30, 45, {"baseline_minutes": 5})])   # history enough from minute 45
    judged = _judge(pd.concat([blind, growing], ignore_index=True)).set_index("entity_id")
    assert judged.loc["node-0:2", "reason"] == "missing field sm_clock_hertz" and not judged.loc["node-0:2", "judged"]
    assert judged.loc["node-0:3", "judged"] and judged.loc["node-0:3", "judged_minutes"] == 15
    assert judgement.summary(judged.reset_index(), "gpu") == "1 gpu(s) judged; 1 not judged: 1 missing field sm_clock_hertz"


def test_lookback_rows_are_not_counted_and_an_empty_frame_judges_nothing():
    frame = gpu_frame(minutes=0, lookback=30)        # only the lookback: nothing of this hour to judge
    assert _judge(frame).empty and _judge(frame.iloc[0:0]).empty


def test_the_check_stores_and_shows_what_it_could_not_judge_and_the_cli_says_so(tmp_path, capsys, monkeypatch):
    """A GPU watched since long before the hour is judged; one that appears 5 minutes before its end
    is not (too little history); with no incident, `goodput incidents` says both, not just 'no incidents'."""
    watched = samples("n", 0, utilization_ratio=lambda s: 0.95, sm_clock_hertz=lambda s: 1.9e9,
                      throttle_reasons=lambda s: 0, temperature_celsius=lambda s: 60.0)
    late = watched.assign(gpu_index=1, gpu_uuid="GPU-n-1")
    late = late[late["time"] >= T0 + pd.Timedelta(minutes=55)]
    warehouse = WarehouseResource(path=str(tmp_path / "warehouse.duckdb"))
    with warehouse.connect() as con:
        con.register("rows", pd.concat([watched, late], ignore_index=True))
        con.execute("INSERT INTO gpu_samples BY NAME SELECT * FROM rows")
        for hour in (T0 - pd.Timedelta("1h"), T0):     # the GPU baselines, as the baselines asset builds them
            sql.run(con, "baselines/gpu_minutes", series_params(hour, hour + pd.Timedelta("1h"), 30))
        frame, found = evaluate(con, THERMAL, T0.to_pydatetime(), (T0 + pd.Timedelta("1h")).to_pydatetime())
        stored = con.execute("SELECT entity_id, judged, reason FROM judgements ORDER BY entity_id").fetchall()
        unjudged = con.execute("SELECT entity_id FROM unjudged_entities").fetchall()
    assert found.empty
    assert stored == [("n:0", True, None), ("n:1", False, "too little history (< 10 baseline minutes)")]
    assert unjudged == [("n:1",)]
    result = check_result(THERMAL, frame, found, dict(THERMAL.thresholds))
    assert result.passed and result.metadata["entities_not_judged"].value == 1
    assert "1 gpu(s) judged; 1 not judged: 1 too little history" in result.description
    monkeypatch.setenv("GOODPUT_HOME", str(tmp_path))
    assert main(["incidents", "--home", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "no incidents" in out
    assert "gpu: 1 of 2 judged by some signal; 1 gpu(s) not judged by any signal: too little history" in out


def test_the_board_now_page_shows_what_the_latest_hour_could_not_judge(tmp_path):
    from tests.helpers import LiveBoard, text_of

    hour = pd.Timestamp("2026-11-30 09:00")
    rows = pd.DataFrame([
        {"signal": "loss_scale_collapse", "partition_start": hour, "entity_type": "run", "entity_id": "bf16-run",
         "minutes": 60, "judged_minutes": 0, "judged": False, "reason": "missing field loss_scale"},
        {"signal": "loss_spike", "partition_start": hour, "entity_type": "run", "entity_id": "bf16-run",
         "minutes": 60, "judged_minutes": 60, "judged": True, "reason": None},
        {"signal": "loss_spike", "partition_start": hour, "entity_type": "run", "entity_id": "new-run",
         "minutes": 6, "judged_minutes": 0, "judged": False, "reason": "too little history (< 20 baseline minutes)"},
    ])
    with WarehouseResource(path=str(tmp_path / "warehouse.duckdb")).connect() as con:
        con.register("rows", rows)
        con.execute("INSERT INTO judgements BY NAME SELECT * FROM rows")
    with LiveBoard(tmp_path) as board:
        page = html.unescape(text_of(board.get("/").text))
    assert "Not judged in the latest hour (2026-11-30 09:00" in page
    assert "run any signal 1 2 too little history (< 20 baseline minutes)" in page      # new-run: nothing judged it
    assert "run loss_scale_collapse 1 1 missing field loss_scale" in page               # bf16-run: judged by others
    with WarehouseResource(path=str(tmp_path / "warehouse.duckdb")).connect() as con:
        con.execute("UPDATE judgements SET judged = true, judged_minutes = minutes, reason = NULL")
    with LiveBoard(tmp_path) as board:
        assert "Not judged in the latest hour" in text_of(board.get("/").text)          # the section stays ...
        assert "any signal 0 2" in text_of(board.get("/").text)                          # ... saying all were judged


def _judge_one_by_one(frame, signal_name, entity, entity_column, thresholds):
    """The per-entity reading judge() must equal (its first form, kept as the oracle), over the same rows."""
    work = judgement.row_needs(frame, signal_name, entity, entity_column, thresholds)
    out = []
    for entity_id, g in work.groupby("entity_id", sort=True):
        judged_minutes = int(g.loc[g["failed"].isna(), "minute"].nunique())
        reasons = g["failed"].dropna()
        out.append({"entity_type": entity, "entity_id": entity_id, "minutes": int(g["minute"].nunique()),
                    "judged_minutes": judged_minutes, "judged": judged_minutes > 0,
                    "reason": None if judged_minutes else (reasons.mode().sort_values().iloc[0] if not reasons.empty
                                                           else "not judged")})
    return pd.DataFrame(out, columns=["entity_type", "entity_id", "minutes", "judged_minutes", "judged", "reason"])


@pytest.mark.parametrize("cells", [judgement.GRID_CELLS, 0], ids=["grid", "sorted pairs"])
def test_judging_every_entity_at_once_equals_judging_them_one_by_one(cells, monkeypatch):
    """Random GPU frames (missing fields, short baselines, ties between reasons, lookback rows, a GPU twice in
    a minute): the judgements of judge() equal the per-entity reading, entity by entity, whether it counts
    an entity's distinct minutes on a grid or from its sorted (entity, minute) pairs."""
    import numpy as np

    monkeypatch.setattr(judgement, "GRID_CELLS", cells)

    signal = REGISTRY.get("gpu_thermal_throttle")
    rng = np.random.default_rng(7)
    for _ in range(20):
        n = int(rng.integers(1, 400))
        frame = pd.DataFrame({
            "host": rng.choice(["a", "b", "c"], n), "gpu_index": rng.integers(0, 4, n),
            "tick": T0 + pd.to_timedelta(rng.integers(0, 60, n), unit="min"),
            "in_window": rng.random(n) > 0.1,
            "sm_clock_hertz": np.where(rng.random(n) > 0.3, 1.9e9, np.nan),
            "throttle_reasons": np.where(rng.random(n) > 0.5, 0.0, np.nan),
            "sm_clock_hertz_baseline": np.where(rng.random(n) > 0.4, 1.9e9, np.nan),
            "baseline_minutes": rng.integers(0, 30, n),
        })
        args = (frame, signal.name, signal.entity, signal.entity_column, dict(signal.thresholds))
        pd.testing.assert_frame_equal(judgement.judge(*args), _judge_one_by_one(*args))
