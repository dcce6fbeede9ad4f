"""A job killed without a word (issue 17: run_crashed needed the job's run_ended).

SIGKILL, the kernel's OOM killer or a node's crash take the launcher with the job: no `run_ended`. The
physics still tells it: every rank's steps stop together AND every GPU the run held then reports free
(its processes gone: memory released, utilization 0) while the exporter keeps reporting. Look-alikes
that must not be a crash: a hang (the GPUs stay held, spinning), a checkpoint pause (held, then the
steps resume), a telemetry gap (the reports stop), a clean exit that logged no end (it saved a
checkpoint at its last step), a dead rank whose peer still holds its GPU (rank_dropout's)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import checks.signals  # noqa: F401  (registers the signals)
from assets.baselines import series_params
from checks.registry import REGISTRY
from orchestration.storage import sql
from tests.detector_frames import warehouse_of

T0 = pd.Timestamp("2026-11-30 00:00")
CARD = 85_899_345_920
STOP = 40 * 60.0        # the steps' last second, from T0
SIGNAL = REGISTRY.get("run_crashed")


def _job(after: dict[int, str], resume_at: float | None = None, final_checkpoint: bool = False) -> pd.DataFrame:
    """A 2-rank job stepping every 2 s from 00:05 to 00:40 (and again from `resume_at`), with GPU samples
    every 10 s to 00:55; after 00:40 each GPU is `after[g]`: 'free' (no process: idle, memory released),
    'held' (spinning, memory held: a hang), 'paused' (held, idle: a save) or 'silent' (no samples)."""
    t = np.arange(5 * 60.0, STOP, 2.0)
    if resume_at is not None:
        t = np.concatenate([t, np.arange(resume_at, 55 * 60.0, 2.0)])
    steps = pd.DataFrame({
        "time": np.repeat(T0 + pd.to_timedelta(t, unit="s"), 2), "run_id": "job", "rank": np.tile([0, 1], len(t)),
        "world_size": 2, "host": "node-3", "gpu_index": np.tile([0, 1], len(t)), "step": np.repeat(np.arange(len(t)), 2),
        "step_seconds": 2.0, "data_seconds": 0.02, "compute_seconds": 1.6, "collective_seconds": 0.38,
        "source_file": "job.jsonl", "source_line": 1,
    })
    rows = []
    for g in (0, 1):
        for s in np.arange(0.0, 55 * 60.0, 10.0):
            state = "train" if s < STOP or (resume_at is not None and s >= resume_at) else after[g]
            if state == "silent":
                continue
            free = state == "free"
            rows.append({"time": T0 + pd.Timedelta(seconds=s), "host": "node-3", "gpu_index": g,
                         "run_id": None if free else "job",
                         "utilization_ratio": {"train": 0.96, "held": 1.0, "paused": 0.05, "free": 0.0}[state],
                         "memory_used_bytes": int((0.006 if free else 0.8) * CARD), "memory_total_bytes": CARD,
                         "power_watts": {"train": 520.0, "held": 120.0, "paused": 110.0, "free": 65.0}[state],
                         "power_limit_watts": 700.0, "source_file": "node-3.jsonl", "source_line": 1})
    events = [(T0 + pd.Timedelta(minutes=4), "run_started", {"event": "run_started", "run_id": "job"}),
              (T0 + pd.Timedelta(minutes=20), "checkpoint_saved", {"event": "checkpoint_saved", "run_id": "job"}, 600)]
    if final_checkpoint:
        events.append((T0 + pd.Timedelta(seconds=STOP), "checkpoint_saved", {"event": "checkpoint_saved"}, len(t) - 1))
    lineage = pd.DataFrame([{"time": e[0], "event": e[1], "run_id": "job", "payload": json.dumps(e[2]),
                             "step": e[3] if len(e) > 3 else None, "source_file": "job.lineage.jsonl", "source_line": 1}
                            for e in events])
    thresholds = dict(SIGNAL.thresholds)
    with warehouse_of(training_steps=steps, gpu_samples=pd.DataFrame(rows), lineage_events=lineage) as con:
        window = {"start": T0, "end": T0 + pd.Timedelta(hours=1), "window_minutes": 30}
        for name in ("rank_minutes", "gpu_minutes"):
            sql.run(con, f"baselines/{name}", series_params(**window))
        frame = sql.frame(con, SIGNAL.query, {"start": T0, "end": T0 + pd.Timedelta(hours=1), **thresholds})
    return SIGNAL.detector(frame, thresholds)


def test_a_job_killed_without_run_ended_is_a_crash_once_its_gpus_are_free():
    (found,) = _job({0: "free", 1: "free"}).to_dict("records")
    assert found["entity_id"] == "job" and found["gpus"] == ["node-3:0", "node-3:1"]
    assert T0 + pd.Timedelta(minutes=39, seconds=55) <= found["onset"] < T0 + pd.Timedelta(minutes=40)   # its last step
    assert found["detected_at"] == T0 + pd.Timedelta(minutes=43)             # 3 minutes of free GPUs
    ev = found["evidence"]
    assert ev["crashed"] and ev["cause"].startswith("killed without a word") and ev["status"].startswith("no run_ended")
    assert ev["utilization_after_pct"] == 0.0 and ev["memory_after_gib"] < 1 and ev["last_checkpoint_step"] == 600


@pytest.mark.parametrize("case, after, resume_at, final_checkpoint", [
    ("a hang: the GPUs stay held, spinning", {0: "held", 1: "held"}, None, False),
    ("a checkpoint pause: held, then the steps resume", {0: "paused", 1: "paused"}, STOP + 150, False),
    ("a telemetry gap: the reports stop", {0: "silent", 1: "silent"}, None, False),
    ("a dead rank: its peer still holds its GPU", {0: "free", 1: "held"}, None, False),
    ("a clean exit without run_ended: it saved its last step", {0: "free", 1: "free"}, None, True),
])
def test_look_alikes_are_not_a_crash(case, after, resume_at, final_checkpoint):
    assert _job(after, resume_at=resume_at, final_checkpoint=final_checkpoint).empty, case


def test_the_simulator_kills_a_job_without_run_ended(tmp_path):
    """`job_killed`: no step after the onset, every GPU free at once, and no run_ended in the lineage."""
    from simulator import load_scenario, simulate

    path = tmp_path / "killed.yaml"
    path.write_text("""
name: killed
seed: 5
start: "2026-11-30T00:00:00Z"
duration: 40m
cluster: {hosts: 1, gpus_per_host: 2, sample_interval: 10s,
          gpu: {name: "NVIDIA H100 80GB HBM3", memory_total_bytes: 85899345920, power_limit_watts: 700}}
runs:
  - {id: k, start: 2m, duration: 35m, hosts: [0], step_time: 2s, checkpoint_interval_steps: 300,
     loss: {initial: 9.0, floor: 2.1, decay: 0.35, noise: 0.02}}
faults:
  - {type: job_killed, target: "run:k", onset: 20m, duration: 5m}
""")
    simulate(load_scenario(path), tmp_path / "out")

    def records(source):
        return [json.loads(line) for p in sorted((tmp_path / "out" / "raw" / source).rglob("*.jsonl"))
                for line in p.read_text().splitlines() if line.strip()]
    onset = pd.Timestamp("2026-11-30 00:20")
    assert not [e for e in records("lineage_events") if e["event"] == "run_ended"]
    assert max(pd.Timestamp(r["time"]).tz_localize(None) for r in records("training_steps")) < onset
    after = [r for r in records("gpu_samples") if pd.Timestamp(r["time"]).tz_localize(None) >= onset]
    assert after and all(r.get("run_id") is None and r["utilization_ratio"] == 0.0 for r in after)
