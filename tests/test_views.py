"""The analyst views (sql/views) on scenarios whose answers are known.

- The small scenario (1 host x 2 GPUs, one run, a 20-minute hang) processed through the real
  assets and checks: once after its first hour (the hang still going, its incident open) and once
  after both hours (the incident resolved).
- The same scenario without the hang: nothing is wasted on stalls.
- A hand-made warehouse with a crash and a restart, laid out on a 10-second grid so every figure is
  exact: the restart's lost GPU-hours, the steps replayed and the checkpoint it resumed from.
"""

from __future__ import annotations

import json
import shutil
from datetime import datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest
import yaml

from orchestration.definitions import resources_for
from orchestration.storage.warehouse import WarehouseResource, create_views, views
from simulator import load_scenario, scenario_from_dict, simulate
from tests.helpers import SMALL, check_and_fold, memory_instance

VIEWS = {"runs", "stall_windows", "restarts", "gpu_time", "goodput", "run_health", "open_incidents",
         "badput_by_run", "badput_by_team_day", "badput_by_cause", "restart_badput", "incident_restart_cost",
         "incident_timeline", "checkpoint_status", "restart_cost", "serving_versions", "drift_history"}
VIEWS |= {"monitor_incidents", "open_incident_groups"}   # the monitor's incidents; GPU-hours at risk per correlated group
VIEWS |= {"judged_entities", "unjudged_entities"}         # what the checks could judge, and the entity-hours none could
HOURS = ("2026-11-30-00:00", "2026-11-30-01:00")


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """The small scenario: {'partial': warehouse after hour 0, 'full': after both hours, 'home', 'scenario'}."""
    home = tmp_path_factory.mktemp("views-small")
    scenario = load_scenario(SMALL)
    simulate(scenario, home)
    resources = resources_for(home)
    with memory_instance() as instance:
        check_and_fold(resources, instance, HOURS[:1])
        partial = home / "partial.duckdb"
        shutil.copy(home / "warehouse.duckdb", partial)
        check_and_fold(resources, instance, HOURS[1:])
    return {"home": home, "scenario": scenario, "full": resources["warehouse"],
            "partial": WarehouseResource(path=str(partial))}


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    """The small scenario without its hang."""
    home = tmp_path_factory.mktemp("views-clean")
    document = yaml.safe_load(SMALL.read_text())
    document["faults"] = []
    simulate(scenario_from_dict(document, source="small-without-faults"), home)
    resources = resources_for(home)
    with memory_instance() as instance:
        check_and_fold(resources, instance, HOURS)
    return resources["warehouse"]


def q(warehouse: WarehouseResource, query: str, params: dict | None = None) -> pd.DataFrame:
    with warehouse.connect(read_only=True) as con:
        return con.execute(query, params or {}).df()


# --------------------------------------------------------------------------- the mechanism


def test_every_view_file_creates_its_view_once_and_readers_see_them(small):
    assert {name.split("_", 1)[1] for name, _ in views()} == VIEWS
    found = set(q(small["full"], "SELECT view_name FROM duckdb_views() WHERE NOT internal")["view_name"])
    assert VIEWS <= found
    with small["full"].connect() as con:
        assert create_views(con) is False  # already current: no catalog churn on every write
        assert create_views(con, force=True) is True
    for view in VIEWS:
        q(small["full"], f"SELECT * FROM {view} LIMIT 1")  # each binds to the current tables


def test_a_view_that_no_longer_binds_is_skipped_not_fatal(tmp_path, monkeypatch, caplog):
    import orchestration.storage.warehouse as warehouse_module

    monkeypatch.setattr(warehouse_module, "views", lambda: [
        ("001_broken", "CREATE OR REPLACE VIEW broken AS SELECT no_such_column FROM incidents"),
        ("002_fine", "CREATE OR REPLACE VIEW fine AS SELECT count(*) AS n FROM incidents"),
    ])
    warehouse = WarehouseResource(path=str(tmp_path / "warehouse.duckdb"))
    with warehouse.connect() as con:  # the write connect still works ...
        con.execute("SELECT * FROM fine")
    names = set(q(warehouse, "SELECT view_name FROM duckdb_views() WHERE NOT internal")["view_name"])
    assert "fine" in names and "broken" not in names
    assert "sql/views/001_broken.sql skipped" in caplog.text and "no_such_column" in caplog.text  # ... and says why


# --------------------------------------------------------------------------- goodput


def test_goodput_wasted_hours_equal_the_injected_hang(small):
    truth = pd.read_json(small["home"] / "ground_truth.jsonl", lines=True)
    hang = truth.iloc[0]
    interval = small["scenario"].cluster.sample_interval.total_seconds()
    row = q(small["full"], "SELECT * FROM goodput").iloc[0]
    gpus = 2
    hang_hours = gpus * (pd.Timestamp(hang["end"]) - pd.Timestamp(hang["onset"])).total_seconds() / 3600
    # the injected hang's GPUs x duration, within one sample interval per GPU (the stall runs from the
    # last step before the onset to the first step after the end, so it can hold one sample more)
    assert abs(row["busy_not_progressing_gpu_hours"] - hang_hours) <= gpus * interval / 3600 + 1e-9
    assert row["lost_to_restarts_gpu_hours"] == 0
    parts = ["productive_gpu_hours", "busy_not_progressing_gpu_hours", "idle_allocated_gpu_hours", "lost_to_restarts_gpu_hours"]
    assert sum(row[p] for p in parts) == pytest.approx(row["allocated_gpu_hours"])
    assert row["wasted_gpu_hours"] == pytest.approx(row["allocated_gpu_hours"] - row["productive_gpu_hours"])
    # allocated: both GPUs for the run's whole window (1h30m of training + the 20-minute hang)
    start, end = small["scenario"].run_window("llm-small")
    assert row["allocated_gpu_hours"] == pytest.approx(gpus * (end - start).total_seconds() / 3600, abs=gpus * interval / 3600)
    assert (row["run_id"], row["team"], str(row["day"])[:10]) == ("llm-small", "llm-small", "2026-11-30")
    assert 0.7 < row["goodput_ratio"] < 0.8


def test_idle_allocated_is_the_start_up_and_the_checkpoint_saves(small):
    """Idle while allocated = GPUs x (run start -> first step's start + each checkpoint pause)."""
    wh = small["full"]
    started = q(wh, "SELECT min(time) FROM lineage_events WHERE event = 'run_started'").iloc[0, 0]
    first_step = q(wh, "SELECT min(time - to_microseconds(CAST(step_seconds * 1e6 AS BIGINT))) FROM training_steps "
                       "WHERE step = 1").iloc[0, 0]
    pauses = q(wh, """SELECT c.time AS saved, (SELECT max(t.time) FROM training_steps t WHERE t.step = c.step) AS step_done
                      FROM lineage_events c WHERE c.event = 'checkpoint_saved'""")
    idle_seconds = (first_step - started).total_seconds() + (pauses["saved"] - pauses["step_done"]).dt.total_seconds().sum()
    interval = small["scenario"].cluster.sample_interval.total_seconds()
    windows = 1 + len(pauses)
    row = q(wh, "SELECT * FROM goodput").iloc[0]
    assert row["idle_allocated_gpu_hours"] == pytest.approx(2 * idle_seconds / 3600, abs=2 * windows * interval / 3600)


def test_a_run_without_a_hang_wastes_nothing_on_stalls(clean):
    row = q(clean, "SELECT * FROM goodput").iloc[0]
    assert row["busy_not_progressing_gpu_hours"] == 0 and row["lost_to_restarts_gpu_hours"] == 0
    assert row["goodput_ratio"] > 0.9
    assert q(clean, "SELECT count(*) AS n FROM stall_windows").iloc[0, 0] == 0
    assert set(q(clean, "SELECT DISTINCT status FROM run_health")["status"]) <= {"progressing", "not_progressing"}


def test_gpu_time_accounts_for_every_held_sample_once(small):
    counts = q(small["full"], """SELECT (SELECT count(*) FROM gpu_samples WHERE run_id IS NOT NULL) AS held,
                                        (SELECT count(*) FROM gpu_time) AS classified""").iloc[0]
    assert counts["held"] == counts["classified"] > 0


# --------------------------------------------------------------------------- run health, incidents


def test_run_health_shows_the_stall_minute_by_minute(small):
    health = q(small["full"], "SELECT * FROM run_health WHERE run_id = 'llm-small' ORDER BY minute").set_index("minute")
    hang = health.loc["2026-11-30 00:51":"2026-11-30 01:08"]
    assert len(hang) == 18 and (hang["steps_completed"] == 0).all() and (hang["status"] == "incident").all()
    assert all("busy_not_progressing" in list(s) for s in hang["incident_signals"])
    assert (hang["utilization_ratio"] > 0.9).all()  # busy ...
    before = health.loc["2026-11-30 00:20":"2026-11-30 00:45"]
    assert (before["status"] == "progressing").all()  # ... where before it progressed at ~30 steps a minute on 2 ranks
    assert before["steps_completed"].median() == pytest.approx(30, abs=1) and (before["ranks_reporting"] == 2).all()
    assert health["loss"].dropna().iloc[0] > health["loss"].dropna().iloc[-1]
    assert before["step_seconds"].median() == pytest.approx(2.0, rel=0.05)


def test_open_incidents_lists_the_hang_while_it_lasts_and_not_after(small):
    during = q(small["partial"], "SELECT * FROM open_incidents WHERE signal = 'busy_not_progressing'")
    assert len(during) == 1
    inc = during.iloc[0]
    assert (inc["tier"], inc["signal"], inc["run_id"], inc["owner"]) == ("SEV1", "busy_not_progressing", "llm-small", "platform")
    # the first hour ends 10 minutes into the hang
    assert inc["lasted_minutes"] == pytest.approx(10, abs=1.5)
    assert q(small["full"], "SELECT count(*) FROM open_incidents WHERE signal = 'busy_not_progressing'").iloc[0, 0] == 0


def test_incident_timeline_tells_the_story_in_order(small):
    timeline = q(small["full"], "SELECT * FROM incident_timeline WHERE signal = 'busy_not_progressing'")
    assert timeline["incident_id"].nunique() == 1
    kinds = list(timeline["kind"])
    order = [kinds.index(k) for k in ("run_started", "checkpoint_saved", "onset", "opened", "last_seen", "resolved", "run_ended")]
    assert order == sorted(order)
    assert timeline["time"].is_monotonic_increasing
    # the checkpoint a restart would resume from is the one before the onset; older ones are left out
    checkpoints = timeline[timeline["kind"] == "checkpoint_saved"]["detail"]
    assert "step-001000" in checkpoints.iloc[0] and not checkpoints.str.contains("step-000500").any()
    findings = q(small["full"], "SELECT count(*) FROM findings WHERE signal = 'busy_not_progressing'").iloc[0, 0]
    assert (timeline["kind"] == "finding").sum() == findings == 2


# --------------------------------------------------------------------------- checkpoints


def test_checkpoint_status_at_the_end_and_during_the_hang(small):
    end = q(small["full"], "SELECT * FROM checkpoint_status").iloc[0]
    last = q(small["full"], "SELECT max(step) AS step, max(time) AS at FROM training_steps").iloc[0]
    done_2500 = q(small["full"], "SELECT max(time) FROM training_steps WHERE step = 2500").iloc[0, 0]
    assert (end["last_checkpoint"], end["checkpoint_step"], end["checkpoints"]) == ("/checkpoints/llm-small/step-002500", 2500, 5)
    assert end["checkpoint_files"] == 2 * 2 + 1 and end["checkpoint_bytes"] > 90e9
    assert end["steps_since_checkpoint"] == last["step"] - 2500
    assert end["restart_cost_gpu_hours"] == pytest.approx(2 * (last["at"] - done_2500).total_seconds() / 3600)
    # during the hang: the last checkpoint is step 1000 and the stall itself is what a restart now would redo
    during = q(small["partial"], "SELECT * FROM checkpoint_status").iloc[0]
    assert (during["checkpoint_step"], during["last_step"]) == (1000, 1221)
    assert during["steps_since_checkpoint"] == 221


# --------------------------------------------------------------------------- restarts (hand-made, exact)

T0 = datetime(2026, 11, 30, 0, 0, 0)
GPUS = ["n-0:0", "n-0:1"]


def _at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def build_restarted_run(path: Path, last_step: int = 90) -> WarehouseResource:
    """Run r1 on 2 GPUs, one 10-second step at a time: steps 1-60 end at 70..660 s, a checkpoint at
    step 30 (360 s), a crash after step 60, a restart at 900 s that resumes from step 30 (steps 31..
    end at 970 s + 10 s each; step 61, the first new one, at 1270 s) and runs to step 90 (1560 s).
    GPU samples every 10 s at 5, 15, ... 1595 s. The restart costs [660 s, 1270 s) on both GPUs."""
    warehouse = WarehouseResource(path=str(path))
    steps = [(_at(60 + 10 * k), k) for k in range(1, 61)] + [(_at(960 + 10 * (k - 30)), k) for k in range(31, last_step + 1)]
    training = pd.DataFrame([
        {"time": t, "run_id": "r1", "rank": r, "world_size": 2, "host": "n-0", "gpu_index": r, "step": k,
         "loss": 5.0 - k / 100, "grad_norm": 1.0, "step_seconds": 10.0, "source_file": "f", "source_line": k}
        for t, k in steps for r in (0, 1)])
    started = {"job": "train-vision", "team": "vision", "world_size": 2, "gpus": GPUS}
    lineage = pd.DataFrame([
        {"time": _at(0), "event": "run_started", "run_id": "r1", "step": None, "checkpoint_path": None,
         "payload": json.dumps({"event": "run_started", "run_id": "r1", **started})},
        {"time": _at(360), "event": "checkpoint_saved", "run_id": "r1", "step": 30, "checkpoint_path": "/ck/r1/step-30",
         "payload": json.dumps({"event": "checkpoint_saved", "run_id": "r1", "step": 30, "checkpoint_path": "/ck/r1/step-30",
                                "checkpoint_bytes": 1000, "manifest": {"files": [{"path": "a", "bytes": 1000, "sha256": "0"}]}})},
        {"time": _at(900), "event": "run_started", "run_id": "r1", "step": None, "checkpoint_path": None,
         "payload": json.dumps({"event": "run_started", "run_id": "r1", **started})},
    ]).assign(source_file="l", source_line=range(3))
    samples = pd.DataFrame([
        {"time": _at(5 + 10 * i), "host": "n-0", "gpu_index": g, "run_id": "r1", "utilization_ratio": 0.95,
         "source_file": "g", "source_line": i}
        for i in range(160) for g in (0, 1)])
    with warehouse.connect() as con:
        for table, frame in (("training_steps", training), ("lineage_events", lineage), ("gpu_samples", samples)):
            con.register("frame", frame)
            con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM frame")
            con.unregister("frame")
    return warehouse


@pytest.fixture
def restarted(tmp_path):
    return build_restarted_run(tmp_path / "warehouse.duckdb")


def test_restart_cost_is_the_downtime_and_the_replay(restarted):
    (cost,) = q(restarted, "SELECT * FROM restart_cost").to_dict("records")
    assert (cost["run_id"], cost["team"], cost["attempt"]) == ("r1", "vision", 1)
    assert (cost["last_step_before"], cost["resumed_from_step"], cost["steps_lost"]) == (60, 30, 30)
    assert cost["resumed_from_checkpoint"] == "/ck/r1/step-30"
    assert cost["restarted_at"] == _at(900) and cost["recovered_at"] == _at(1270)
    assert cost["lost_seconds"] == 610
    assert cost["gpu_hours_lost"] == pytest.approx(2 * 610 / 3600)
    run = q(restarted, "SELECT * FROM runs").iloc[0]
    assert (run["team"], run["job"], run["restarts"], run["gpus"], run["last_step"]) == ("vision", "train-vision", 1, 2, 90)


def test_goodput_splits_the_restarted_run_exactly(restarted):
    row = q(restarted, "SELECT * FROM goodput").iloc[0]
    hours = {k: row[f"{k}_gpu_hours"] * 3600 / 2 for k in ("allocated", "productive", "idle_allocated", "lost_to_restarts",
                                                            "busy_not_progressing")}
    # per GPU: 160 samples of 10 s; steps [60 s, 660 s) and [1270 s, 1560 s); start-up and the tail idle
    assert hours == pytest.approx({"allocated": 1600, "productive": 890, "idle_allocated": 100,
                                   "lost_to_restarts": 610, "busy_not_progressing": 0})
    assert row["team"] == "vision"


def test_a_restart_that_never_gets_back_loses_everything_held_after_the_crash(tmp_path):
    """Same run, but after the restart it replays only up to step 50 and stops: never recovered."""
    warehouse = build_restarted_run(tmp_path / "warehouse.duckdb", last_step=50)
    (cost,) = q(warehouse, "SELECT * FROM restart_cost").to_dict("records")
    assert cost["recovered_at"] is None or pd.isna(cost["recovered_at"])
    assert cost["gpu_hours_lost"] == pytest.approx(2 * 940 / 3600)  # samples 665 s .. 1595 s on both GPUs
    row = q(warehouse, "SELECT * FROM goodput").iloc[0]
    assert row["productive_gpu_hours"] == pytest.approx(2 * 600 / 3600)
    assert row["idle_allocated_gpu_hours"] == pytest.approx(2 * 60 / 3600)


def test_checkpoint_status_of_the_restarted_run(restarted):
    status = q(restarted, "SELECT * FROM checkpoint_status").iloc[0]
    assert (status["last_checkpoint"], status["checkpoint_step"], status["steps_since_checkpoint"]) == ("/ck/r1/step-30", 30, 60)
    assert status["checkpoint_files"] == 1 and status["checkpoint_bytes"] == 1000
    # a restart now would redo everything since step 30 completed (360 s), up to the last step (1560 s)
    assert status["restart_cost_gpu_hours"] == pytest.approx(2 * (1560 - 360) / 3600)


# --------------------------------------------------------------------------- the docs


def test_every_query_in_the_analyst_docs_runs(small):
    import re

    from tests.helpers import REPO

    queries = re.findall(r"```sql\n(.*?)```", (REPO / "docs" / "analysts.md").read_text(), re.S)
    assert len(queries) >= 8
    with small["full"].connect(read_only=True) as con:
        for query in queries:
            con.execute(query).fetchall()
