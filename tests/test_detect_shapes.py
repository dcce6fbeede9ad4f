"""The cluster shapes of issue 17 as an operator should see them, and how the scorer counts them.

- a job-wide crash (every rank stops, the GPUs are released together) is a `run_crashed` finding,
  named a CUDA out-of-memory when the GPUs' memory filled before the end; its look-alikes, a
  preemption (the scheduler's decision) and a run that completed, are not;
- a host's network degrading is scored against a collective regression that names that host's
  GPUs (not one on another host), a data-loader stall against a step-time regression;
- a preemption, a clock skew and a telemetry gap have nothing to detect: the scorer counts the
  incidents they caused as false alarms (none: "quiet"), never a missed detection.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import checks.signals  # noqa: F401  (registers the signals)
from assets.baselines import series_params
from checks.registry import REGISTRY
from orchestration.evaluation.scoring import EXPECTED_QUIET, match, score
from orchestration.storage import sql
from tests.detector_frames import warehouse_of

T0 = pd.Timestamp("2026-11-30 00:00")
CARD = 85_899_345_920


def _ended(status: str | None, memory_at_end: float) -> pd.DataFrame:
    """A 2-rank job stepping every 2 s from 00:05 to 00:40, then `run_ended` with `status` (None: no
    event at all); its GPUs' memory at `memory_at_end` of the card over the last minute."""
    t = np.arange(5 * 60.0, 40 * 60.0, 2.0)
    steps = pd.DataFrame({
        "time": np.repeat(T0 + pd.to_timedelta(t, unit="s"), 2), "run_id": "job", "rank": np.tile([0, 1], len(t)),
        "world_size": 2, "host": "node-3", "gpu_index": np.tile([0, 1], len(t)), "step": np.repeat(np.arange(len(t)), 2),
        "step_seconds": 2.0, "data_seconds": 0.02, "compute_seconds": 1.6, "collective_seconds": 0.38,
        "source_file": "job.jsonl", "source_line": 1,
    })
    s = np.arange(0.0, 40 * 60.0, 10.0)
    memory = np.where(s >= 39 * 60.0, memory_at_end, 0.8) * CARD
    samples = pd.DataFrame({
        "time": np.repeat(T0 + pd.to_timedelta(s, unit="s"), 2), "host": "node-3", "gpu_index": np.tile([0, 1], len(s)),
        "run_id": "job", "utilization_ratio": 0.96, "memory_used_bytes": np.repeat(memory, 2).astype("int64"),
        "memory_total_bytes": CARD, "power_watts": 520.0, "power_limit_watts": 700.0,
        "source_file": "node-3.jsonl", "source_line": 1,
    })
    events = [(T0 + pd.Timedelta(minutes=4), "run_started", {"event": "run_started", "run_id": "job"})]
    if status is not None:
        events.append((T0 + pd.Timedelta(minutes=40), "run_ended", {"event": "run_ended", "run_id": "job", "status": status}))
    lineage = pd.DataFrame([{"time": at, "event": ev, "run_id": "job", "payload": json.dumps(p),
                             "source_file": "job.lineage.jsonl", "source_line": 1} for at, ev, p in events])
    thresholds = dict(REGISTRY.get("run_crashed").thresholds)
    with warehouse_of(training_steps=steps, gpu_samples=samples, lineage_events=lineage) as con:
        window = {"start": T0, "end": T0 + pd.Timedelta(hours=1), "window_minutes": 30}
        sql.run(con, "baselines/rank_minutes", series_params(**window))
        frame = sql.frame(con, "detect/run_crashed", {"start": T0, "end": T0 + pd.Timedelta(hours=1), **thresholds})
    return REGISTRY.get("run_crashed").detector(frame, thresholds)


def test_a_job_that_died_of_out_of_memory_is_a_crash_from_its_last_step():
    (finding,) = _ended("failed", memory_at_end=0.995).to_dict("records")
    assert finding["entity_id"] == "job" and finding["gpus"] == ["node-3:0", "node-3:1"]
    assert T0 + pd.Timedelta(minutes=39, seconds=55) <= finding["onset"] < T0 + pd.Timedelta(minutes=40)
    assert finding["detected_at"] == T0 + pd.Timedelta(minutes=40)
    assert finding["evidence"]["cause"].startswith("CUDA out of memory")


def test_a_crash_without_a_full_card_names_no_cause():
    (finding,) = _ended("failed", memory_at_end=0.8).to_dict("records")
    assert finding["evidence"]["cause"] == "unknown" and finding["evidence"]["status"] == "failed"


@pytest.mark.parametrize("status", ["preempted", "completed", None])
def test_a_preemption_or_a_finished_run_is_no_crash(status):
    assert _ended(status, memory_at_end=0.995).empty


# --------------------------------------------------------------------------------------------- #
# Scoring the shapes
# --------------------------------------------------------------------------------------------- #


def _truth(*faults) -> pd.DataFrame:
    return pd.DataFrame([{"type": t, "entity": e, "onset": T0 + pd.Timedelta(minutes=a), "end": T0 + pd.Timedelta(minutes=b),
                          "magnitude": 1.0} for t, e, a, b in faults])


def _incident(incident_id, signal, run, gpus, a, b) -> dict:
    return {"incident_id": incident_id, "signal": signal, "entity_type": "run", "entity_id": run, "run_id": run,
            "gpus": gpus, "hosts": sorted({g.split(":")[0] for g in gpus}), "ranks": [],
            "onset": T0 + pd.Timedelta(minutes=a), "opened": T0 + pd.Timedelta(minutes=a + 5),
            "last_seen": T0 + pd.Timedelta(minutes=b), "resolved": T0 + pd.Timedelta(minutes=b)}


def test_a_host_network_fault_is_caught_by_a_collective_regression_naming_its_gpus_only():
    truth = _truth(("host_network_degraded", "host:node-1", 60, 100))
    on_host = pd.DataFrame([_incident("a", "collective_regression", "net-r", ["node-0:0", "node-1:0"], 61, 100)])
    elsewhere = pd.DataFrame([_incident("b", "collective_regression", "other", ["node-2:0", "node-2:1"], 61, 100)])
    assert match(truth, on_host)["detected"].tolist() == [True]
    assert match(truth, elsewhere)["detected"].tolist() == [False]


def test_a_data_stall_is_caught_by_a_step_time_regression():
    truth = _truth(("data_stall", "run:stall-r", 90, 120))
    found = pd.DataFrame([_incident("a", "step_time_regression", "stall-r", ["node-2:0"], 91, 120)])
    (row,) = score(truth, found).to_dict("records")
    assert row["fault_type"] == "data_stall" and row["recall"] == 1.0 and row["false_alarms"] == 0


@pytest.mark.parametrize("fault", [("preemption", "run:pre-r", 60, 65), ("clock_skew", "host:node-2", 0, 180),
                                   ("telemetry_gap", "host:node-2", 140, 155)])
def test_an_expected_quiet_shape_is_scored_by_the_incidents_it_caused(fault):
    truth = _truth(fault)
    assert fault[0] in EXPECTED_QUIET
    far = pd.DataFrame([_incident("x", "straggler_rank", "far", ["node-0:1"], 61, 70)])   # another run's, another host's
    quiet = {r["fault_type"]: r for r in score(truth, far).to_dict("records")}[fault[0]]
    assert quiet["false_alarms"] == 0 and quiet["missed"] == 0 and np.isnan(quiet["recall"])
    caused = pd.DataFrame([_incident("y", "memory_fragmentation", "pre-r", ["node-2:2", "node-2:3"], fault[2] + 2, fault[2] + 10)])
    rows = {r["fault_type"]: r for r in score(truth, caused).to_dict("records")}
    assert rows[fault[0]]["false_alarms"] == 1 and rows[fault[0]]["missed"] == 0


# --------------------------------------------------------------------------------------------- #
# A preempted job requeued from its checkpoint computes its steps again: not a stall
# --------------------------------------------------------------------------------------------- #


def _requeued(hang_at_minute: float | None) -> pd.DataFrame:
    """A 2-rank job stepping every 2 s from 00:05, checkpoint at step 1200 (00:45), preempted at 01:00
    (GPUs released), requeued at 01:05 and stepping again from step 1201 at 01:07; with
    `hang_at_minute` the second attempt stops stepping then while its GPUs stay busy."""
    first = np.arange(5 * 60.0, 60 * 60.0, 2.0)
    stop = 100 * 60.0 if hang_at_minute is None else hang_at_minute * 60.0
    second = np.arange(67 * 60.0, stop, 2.0)
    t = np.concatenate([first, second])
    step = np.concatenate([np.arange(1, len(first) + 1), 1200 + np.arange(1, len(second) + 1)])
    steps = pd.DataFrame({
        "time": np.repeat(T0 + pd.to_timedelta(t, unit="s"), 2), "run_id": "job", "rank": np.tile([0, 1], len(t)),
        "world_size": 2, "host": "node-2", "gpu_index": np.tile([2, 3], len(t)), "step": np.repeat(step, 2),
        "step_seconds": 2.0, "source_file": "job.jsonl", "source_line": 1,
    })
    s = np.arange(0.0, 100 * 60.0, 10.0)
    held = (s < 60 * 60.0) | (s >= 65 * 60.0)
    util = np.where((s >= 65 * 60.0) & (s < 67 * 60.0), 0.1, 0.96)
    samples = pd.DataFrame({
        "time": np.repeat(T0 + pd.to_timedelta(s, unit="s"), 2), "host": "node-2", "gpu_index": np.tile([2, 3], len(s)),
        "run_id": np.repeat(np.where(held, "job", None), 2), "utilization_ratio": np.repeat(np.where(held, util, 0.0), 2),
        "source_file": "node-2.jsonl", "source_line": 1,
    })
    events = [(4, "run_started", {}), (60, "run_ended", {"status": "preempted"}), (65, "run_started", {})]
    lineage = pd.DataFrame([{"time": T0 + pd.Timedelta(minutes=m), "event": ev, "run_id": "job",
                             "payload": json.dumps({"event": ev, "run_id": "job", **p}),
                             "source_file": "job.lineage.jsonl", "source_line": 1} for m, ev, p in events])
    thresholds = dict(REGISTRY.get("busy_not_progressing").thresholds)
    start = T0 + pd.Timedelta(hours=1)
    with warehouse_of(training_steps=steps, gpu_samples=samples, lineage_events=lineage) as con:
        frame = sql.frame(con, "detect/busy_not_progressing", {"start": start, "end": start + pd.Timedelta(hours=1), **thresholds})
    return REGISTRY.get("busy_not_progressing").detector(frame, thresholds)


def test_a_requeued_job_computing_its_steps_again_is_not_stalled():
    assert _requeued(hang_at_minute=None).empty


def test_a_requeued_job_that_then_hangs_is_stalled_from_its_last_step():
    (finding,) = _requeued(hang_at_minute=80).to_dict("records")
    assert T0 + pd.Timedelta(minutes=79, seconds=55) <= finding["onset"] < T0 + pd.Timedelta(minutes=80)


def test_a_requeued_job_resumes_its_loss_curve_from_the_checkpoint(tmp_path):
    """simulator/scenarios/shapes.yaml: shared-b is preempted at 00:20 and resumes from its last
    checkpoint; the model resumes too, so its loss goes on from the checkpoint's, not from the start."""
    from simulator import load_scenario, simulate

    simulate(load_scenario("simulator/scenarios/shapes.yaml"), tmp_path)
    rows = [json.loads(line) for path in sorted((tmp_path / "raw" / "training_steps").rglob("shared-b*.jsonl"))
            for line in path.read_text().splitlines() if line.strip()]
    steps = pd.DataFrame(rows)
    steps["time"] = pd.to_datetime(steps["time"])
    steps = steps[steps["rank"] == 0].sort_values("time").reset_index(drop=True)
    restart = steps["step"].diff().lt(0).idxmax()           # the first record whose step went back
    resumed = steps.loc[restart:]
    first = steps.loc[: restart - 1]
    at_checkpoint = first[first["step"].between(resumed["step"].iloc[0] - 20, resumed["step"].iloc[0] + 20)]["loss"].median()
    assert resumed.head(40)["loss"].median() == pytest.approx(at_checkpoint, rel=0.05)
    assert first.head(40)["loss"].median() > 1.2 * at_checkpoint    # the start of the curve is far higher
